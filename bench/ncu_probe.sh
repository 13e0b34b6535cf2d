#!/usr/bin/env bash
# Nsight Compute on one kernel of the built profiler, on one problem: duration, SM clock,
# throughput of DRAM, L2 and the SMs, the bytes each level moved, occupancy, launch shape and
# warp state. Needs `ncu` on PATH and a profiler built with the kernel (`scons profiler KERNELS=NAME`).
#
#   bench/ncu_probe.sh "OP DTYPE EXTENTS..." KERNEL [BUILD] [FUNCTION_REGEX]
#
# OP DTYPE EXTENTS: a job file's workload record after its name (profiler/main.cu), e.g.
#   bench/ncu_probe.sh "conv2d_fprop f16 256 28 28 128 512 1 1 0 0 1 1 1 1" cutlass3x_sm90_tensorop_...
#   bench/ncu_probe.sh "conv2d_fprop_grouped f16 32 112 112 64 64 3 3 1 1 2 2 1 1 4" kernelgen_sm90_tensorop_gconv_... generated grouped_mma
# FUNCTION_REGEX: what the kernel's device function is called (default device_kernel, CUTLASS's;
# this project's kernels are named by their header: grouped_mma, depthwise, ...).
# The profiler verifies the kernel before it times it, at the kernel's tolerance as BUILD/kernels.json
# gives it (TOLERANCE= overrides; 0.02, fp16 accumulation's, where the manifest does not name it); a
# kernel that fails there is not timed, and the probe prints the profiler's result line instead.
# ncu runs the kernel at its default base clocks, so durations exceed the profiler's.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,14p "$0" >&2; exit 2; }
job=$1 kernel=$2 build=${3:-generated} function=${4:-device_kernel}
tolerance=${TOLERANCE:-$(python3 - "$build/kernels.json" "$kernel" <<'EOF'
import json, sys
try:
    print(json.load(open(sys.argv[1]))["kernels"][sys.argv[2]]["tolerance"])
except (OSError, ValueError, KeyError, TypeError):
    print(0.02)
EOF
)}
jobs=$(mktemp) out=$(mktemp)
trap 'rm -f "$jobs" "$out"' EXIT
printf 'workload probe %s\nkernel %s %s\n' "$job" "$kernel" "$tolerance" > "$jobs"
# the verification launch and one warm-up come first; profile the timed launch after them
ncu --target-processes all -k "regex:$function" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct \
    "$build/profiler" --jobs "$jobs" --repeats 1 --warmup 1 > "$out" 2>&1 || true
grep -E "Duration|SM Frequency|Throughput|Occupancy|Registers|Grid Size|Block Limit|Issued|Eligible|dram__|lts__" "$out" ||
  { echo "ncu_probe.sh: nothing profiled; the profiler said:" >&2; grep -E "^result|rror" "$out" >&2; exit 1; }
