#!/usr/bin/env bash
# Benchmark: a network no set holds, as a new user brings it: imported, profiled from a cold build,
# compared with the library, then the issues' figures for it. Prints a summary last.
#
#   bench/kept_back.sh MODEL BATCH [more scons arguments]      e.g. bench/kept_back.sh timm.models:mixnet_m 32
#
# The set is named <model>_b<batch>_kept (kernel_specs/workloads/, written again if there); the
# build goes to a new folder under ${TMPDIR:-/tmp} (a cold build; removed at the end), the results to
# profile_results/<set>/<gpu>/. Needs a GPU, PyTorch and the model's package; -j is $(nproc)
# unless JOBS= says, scons is `scons` unless SCONS= says (SCONS="python3 -m SCons"). A GPU with no
# cost model of its own takes COST_MODEL= among the arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: bench/kept_back.sh MODEL BATCH [scons arguments]" >&2; exit 2; }
model=$1 batch=$2
shift 2
case "$batch" in ''|*[!0-9]*) echo "bench/kept_back.sh: BATCH must be a positive integer, not '$batch'" >&2; exit 2 ;; esac
short=${model##*:}
short=${short##*.}
set_name=$(printf '%s' "${short}_b${batch}_kept" | tr -c 'A-Za-z0-9_\n' '_')
jobs=${JOBS:-$(nproc)}
read -r -a scons <<< "${SCONS:-scons}"
build=$(mktemp -d "${TMPDIR:-/tmp}/kept-back-XXXXXX")
trap 'rm -rf "$build"' EXIT

"${scons[@]}" -Q workloads "MODEL=$model" "BATCH=$batch" "NAME=$set_name" EPILOGUES=1 REPLACE=1
start=$(date +%s)
"${scons[@]}" profile "WORKLOADS=$set_name" "BUILD=$build" "-j$jobs" "$@" | tee "$build/profile.log"
profiled=$(date +%s)
"${scons[@]}" compare "WORKLOADS=$set_name" "BUILD=$build" "-j$jobs" "$@" > "$build/compare.log"
gpu=$(ls -t "profile_results/$set_name" | head -1)

echo
echo "== $set_name, cold build on $jobs jobs"
grep -E '^compiled [0-9]+ objects|^profiled [0-9]+ \(workload' "$build/profile.log" || true
echo "scons profile: $((profiled - start)) s, compile included"
grep -E '^Network total|^Against the library in a CUDA graph' "$build/compare.log" || true
python3 bench/targets.py "$set_name" --gpu "$gpu"
