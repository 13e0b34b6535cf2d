#!/usr/bin/env bash
# Benchmark: committed sets measured again on this GPU, whole or narrowed to some of their kernels,
# each then compared with the library; prints the issues' targets for them last.
#
#   bench/measure_sets.sh LIST [scons arguments]
#
# LIST holds a line a set, `<set> [<KERNELS= globs>]` ('#' starts a comment; a set narrowed on
# several lines is measured once, on all their globs), e.g.
#   mixnet_m_b32_fused *dwconv*9x9*,*dwconv_pairs_half2*tile8x14*
#   convnext_tiny_b32
# A set with globs has the kernels they match measured on the layers those kernels serve (`scons
# profile TOP=all KERNELS=<globs>`), then its chosen kernels compared with the library on every
# layer (`scons compare KERNELS=<them>`, `python -m kernelgen.report <set> --kernels`: no other
# kernel compiled or measured; the whole set where the choices cannot be read); one without has
# the model's proposals it holds no rows of measured, then compared (`scons profile compare`).
# Where two or more lines have globs, one build compiles every line's kernels first (`scons
# profiler` on the lines of those sets in one file, $LOGS/lines.txt), so that the compiles share
# the jobs rather than wait for one set at a time. The results go
# to profile_results/<set>/<gpu>/ as any profile's; each set's output to $LOGS/<set>.log (LOGS=,
# else a new folder under ${TMPDIR:-/tmp}, kept). LIMIT=<seconds> starts no set but the first after that long;
# JOBS= and SCONS= as bench/kept_back.sh, PYTHON= the Python with pandas (python3), GPU_NAME= the
# GPU whose results name the choices (nvidia-smi's first). A RESULTS=<root> among the scons arguments is
# where the choices and the targets are read too. Every line is checked before anything runs.
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
  # a set narrowed on an earlier line takes this line's globs too: one profile and one compare a set
  for i in "${!sets[@]}"; do
    if [ -n "${glob:-}" ] && [ "${sets[i]}" = "$set" ] && [ -n "${globs[i]}" ]; then
      globs[i]="${globs[i]},$glob" set=""
      break
    fi
  done
  [ -z "$set" ] || { sets+=("$set") globs+=("${glob:-}"); }
done < "$list"
[ ${#sets[@]} -gt 0 ] || { echo "$me: $list names no set" >&2; exit 2; }

results=profile_results  # the results root the runs write (a RESULTS= scons argument), for the choices and targets
for arg in "$@"; do case "$arg" in RESULTS=*) results=${arg#RESULTS=} ;; esac; done
jobs=${JOBS:-$(nproc)}
read -r -a scons <<< "${SCONS:-scons}"
logs=${LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/measure-sets-XXXXXX")}
mkdir -p "$logs"
python=${PYTHON:-python3}
gpu=${GPU_NAME:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || true)}
start=$(date +%s) measured=()
narrowed=() kernels=()
for i in "${!sets[@]}"; do
  [ -z "${globs[i]}" ] || { narrowed+=("${sets[i]}"); kernels+=("${globs[i]}"); }
done
if [ ${#narrowed[@]} -ge 2 ]; then
  # the lines of those sets, each problem once, in one workload file (bench/merge_sets.py)
  all=$(IFS=,; echo "${kernels[*]}")
  echo "== one build of the kernels of ${#narrowed[@]} lines, $(date -u +%H:%M:%S)"
  { "$python" bench/merge_sets.py "$logs/lines.txt" "${narrowed[@]}" &&
      "${scons[@]}" profiler "WORKLOADS=$logs/lines.txt" TOP=all "KERNELS=$all" "-j$jobs" "$@"; } > "$logs/build.log" 2>&1 ||
    echo "   failed: $logs/build.log says why (each set builds its own)"
fi
for i in "${!sets[@]}"; do
  set=${sets[i]} glob=${globs[i]} log=$logs/${sets[i]}.log
  if [ -n "${LIMIT:-}" ] && [ "$i" -gt 0 ] && (( $(date +%s) - start >= LIMIT )); then
    echo "== $set: not started (LIMIT=$LIMIT s)"
    continue
  fi
  echo "== $set${glob:+ (KERNELS=$glob)}, $(date -u +%H:%M:%S)"
  if [ -n "$glob" ]; then
    if "${scons[@]}" profile "WORKLOADS=$set" TOP=all "KERNELS=$glob" "-j$jobs" "$@" > "$log" 2>&1; then
      chosen=$(PYTHONPATH="site_scons${PYTHONPATH:+:$PYTHONPATH}" "$python" -m kernelgen.report "$set" --kernels --results "$results" ${gpu:+--gpu "$gpu"} 2>> "$log") ||
        chosen=""
      "${scons[@]}" compare "WORKLOADS=$set" ${chosen:+"KERNELS=$chosen"} "-j$jobs" "$@" >> "$log" 2>&1 ||
        echo "   failed: $log says why"
    else
      echo "   failed: $log says why"
    fi
  else
    "${scons[@]}" profile compare "WORKLOADS=$set" "-j$jobs" "$@" > "$log" 2>&1 || echo "   failed: $log says why"
  fi
  grep -E '^profiled [0-9]+ \(workload|^Network total' "$log" || true
  measured+=("$set")
done
echo "== logs in $logs, $(( $(date +%s) - start )) s"
[ ${#measured[@]} -eq 0 ] || "$python" bench/targets.py "${measured[@]}" --results "$results"
