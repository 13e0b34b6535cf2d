#!/usr/bin/env bash
# Benchmark: a cold `scons profile` split into its compile and profile stages, then a no-op
# rerun of the same command. Prints a summary last.
#
#   bench/cold_build.sh [WORKLOADS] [more scons arguments]     (default: resnet50, -j$(nproc))
#
# It removes generated/ first (a cold build); results already in RESULTS are kept and only
# what is missing is profiled, so point RESULTS= elsewhere to time a full profile.
set -euo pipefail
cd "$(dirname "$0")/.."
workloads=${1:-resnet50}
shift || true
jobs=${JOBS:-$(nproc)}
log=$(mktemp)
stamp() { while IFS= read -r line; do printf '%s\t%s\n' "$(date +%s.%N)" "$line"; printf '%s\n' "$line" >&2; done; }

rm -rf generated
start=$(date +%s.%N)
set +e
scons profile "WORKLOADS=$workloads" "-j$jobs" "$@" 2>&1 | stamp > "$log"
status=${PIPESTATUS[0]}
set -e
end=$(date +%s.%N)
[ "$status" -eq 0 ] || { echo "scons profile failed with status $status" >&2; exit "$status"; }
profile_start=$(awk -F'\t' '$2 ~ /^profiling [0-9]+ workload/ {print $1; exit}' "$log")
kernels=$(grep -c $'\t\\[[0-9]*/[0-9]*\\] nvcc ' "$log" || true)

noop_start=$(date +%s.%N)
scons profile "WORKLOADS=$workloads" "-j$jobs" "$@" > "$log.noop" 2>&1
noop_end=$(date +%s.%N)
noop_nvcc=$(grep -c '^\[[0-9]*/[0-9]*\] nvcc \|^nvcc ' "$log.noop" || true)

python3 - "$start" "$profile_start" "$end" "$noop_start" "$noop_end" "$kernels" "$noop_nvcc" "$jobs" <<'PY'
import sys
start, profile, end, noop_start, noop_end = map(float, sys.argv[1:6])
kernels, noop_nvcc, jobs = sys.argv[6:9]
print(f"cold scons profile -j{jobs}: {end - start:.1f} s = compile {profile - start:.1f} s "
      f"({kernels} nvcc runs: compile units or kernels alone) + profile {end - profile:.1f} s")
print(f"no-op rerun: {noop_end - noop_start:.1f} s, {noop_nvcc} nvcc runs")
PY
