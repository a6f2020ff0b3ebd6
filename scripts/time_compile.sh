#!/usr/bin/env bash
# A compiler launcher that records each compilation's CPU time (issue 32):
#   cmake -B build -DCMAKE_CXX_COMPILER_LAUNCHER=$PWD/scripts/time_compile.sh \
#                  -DCMAKE_CUDA_COMPILER_LAUNCHER=$PWD/scripts/time_compile.sh ...
# appends "user_s<TAB>sys_s<TAB>wall_s<TAB>max_rss_kb<TAB>output" to $COHORT_COMPILE_TIMES (default
# ./compile_times.tsv, in the directory the build runs the compiler from: the build tree) for
# scripts/compile_times.py --cpu. CPU seconds stay meaningful on a busy machine, where Ninja's
# wall times do not. Chains to ccache when COHORT_TIME_COMPILE_CCACHE=1.
set -uo pipefail
log=${COHORT_COMPILE_TIMES:-$PWD/compile_times.tsv}
out=unknown
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[$i]}" = -o ] && ((i + 1 < ${#args[@]})); then out=${args[$((i + 1))]}; fi
done
tmp=$(mktemp)
if [ "${COHORT_TIME_COMPILE_CCACHE:-0}" = 1 ]; then set -- ccache "$@"; fi
/usr/bin/time -f "%U\t%S\t%e\t%M" -o "$tmp" "$@"
rc=$?
printf '%s\t%s\n' "$(tail -1 "$tmp")" "$out" >>"$log"
rm -f "$tmp"
exit $rc
