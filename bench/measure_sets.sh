#!/usr/bin/env bash
# Benchmark: committed sets measured again on this GPU, whole or narrowed to some of their kernels,
# each then compared with the library; prints the issues' targets for them last.
#
#   bench/measure_sets.sh LIST [scons arguments]
#
# LIST holds a line a set, `<set> [<KERNELS= globs>]` ('#' starts a comment), e.g.
#   mixnet_m_b32_fused *dwconv*9x9*,*dwconv_pairs_half2*tile8x14*
#   convnext_tiny_b32
# A set with globs has the kernels they match measured on the layers those kernels serve (`scons
# profile TOP=all KERNELS=<globs>`), then the whole set compared; one without has the model's
# proposals it holds no rows of measured, then compared (`scons profile compare`). The results go
# to profile_results/<set>/<gpu>/ as any profile's; each set's output to $LOGS/<set>.log (LOGS=,
# else a new folder under ${TMPDIR:-/tmp}, kept). LIMIT=<seconds> starts no set but the first after that long;
# JOBS= and SCONS= as bench/kept_back.sh. Every line is checked before anything runs.
set -euo pipefail
me=bench/measure_sets.sh
[ $# -ge 1 ] || { echo "usage: $me LIST [scons arguments]" >&2; exit 2; }
case "$1" in /*) list=$1 ;; *) list=$PWD/$1 ;; esac
shift
cd "$(dirname "$0")/.."
[ -f "$list" ] || { echo "$me: LIST '$list' is not a file" >&2; exit 2; }
case "${LIMIT:-}" in *[!0-9]*) echo "$me: LIMIT must be a number of seconds, not '$LIMIT'" >&2; exit 2 ;; esac

sets=() globs=() n=0
while IFS= read -r line || [ -n "$line" ]; do
  n=$((n + 1))
  read -r set glob extra <<< "${line%%#*}" || true
  [ -n "${set:-}" ] || continue
  where="$me: $list line $n"
  [ -z "${extra:-}" ] || { echo "$where: expected '<set> [<KERNELS= globs>]', not '$line'" >&2; exit 2; }
  case "$set" in *[!A-Za-z0-9_]*) echo "$where: '$set' is not a set's name (letters, digits, '_')" >&2; exit 2 ;; esac
  [ -f "kernel_specs/workloads/$set.txt" ] || {
    echo "$where: no workload set '$set' (kernel_specs/workloads/$set.txt)" >&2; exit 2; }
  sets+=("$set") globs+=("${glob:-}")
done < "$list"
[ ${#sets[@]} -gt 0 ] || { echo "$me: $list names no set" >&2; exit 2; }

jobs=${JOBS:-$(nproc)}
read -r -a scons <<< "${SCONS:-scons}"
logs=${LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/measure-sets-XXXXXX")}
mkdir -p "$logs"
start=$(date +%s) measured=()
for i in "${!sets[@]}"; do
  set=${sets[i]} glob=${globs[i]} log=$logs/${sets[i]}.log
  if [ -n "${LIMIT:-}" ] && [ "$i" -gt 0 ] && (( $(date +%s) - start >= LIMIT )); then
    echo "== $set: not started (LIMIT=$LIMIT s)"
    continue
  fi
  echo "== $set${glob:+ (KERNELS=$glob)}, $(date -u +%H:%M:%S)"
  if [ -n "$glob" ]; then
    "${scons[@]}" profile "WORKLOADS=$set" TOP=all "KERNELS=$glob" "-j$jobs" "$@" > "$log" 2>&1 &&
      "${scons[@]}" compare "WORKLOADS=$set" "-j$jobs" "$@" >> "$log" 2>&1 || echo "   failed: $log says why"
  else
    "${scons[@]}" profile compare "WORKLOADS=$set" "-j$jobs" "$@" > "$log" 2>&1 || echo "   failed: $log says why"
  fi
  grep -E '^profiled [0-9]+ \(workload|^Network total' "$log" || true
  measured+=("$set")
done
echo "== logs in $logs, $(( $(date +%s) - start )) s"
[ ${#measured[@]} -eq 0 ] || python3 bench/targets.py "${measured[@]}"
