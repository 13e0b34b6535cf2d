#!/usr/bin/env bash
# Nsight Compute on one kernel of the built profiler, on one convolution: duration, SM clock,
# throughput of DRAM, L2 and the SMs, and the bytes each level moved. Needs `ncu` on PATH and
# a profiler built with the kernel (`scons profiler KERNELS=NAME`).
#
#   bench/ncu_probe.sh "N H W C K R S PAD_H PAD_W STRIDE_H STRIDE_W DIL_H DIL_W" KERNEL [BUILD]
#
# e.g. bench/ncu_probe.sh "256 28 28 128 512 1 1 0 0 1 1 1 1" cutlass3x_sm90_tensorop_...
# ncu runs the kernel at its default base clocks, so durations exceed the profiler's.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,9p "$0" >&2; exit 2; }
shape=$1 kernel=$2 build=${3:-generated}
jobs=$(mktemp)
trap 'rm -f "$jobs"' EXIT
printf 'workload probe conv2d_fprop %s\nkernel %s 0.001\n' "$shape" "$kernel" > "$jobs"
# the verification launch and one warm-up come first; profile the timed launch after them
ncu --target-processes all -k regex:device_kernel --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct \
    "$build/profiler" --jobs "$jobs" --repeats 1 --warmup 1 |
  grep -E "Duration|SM Frequency|Throughput|dram__|lts__"
