#!/usr/bin/env bash
# How long a user's translation unit takes to compile (issue 32), in both modes:
#   bench/compile/measure.sh [runs]      (default 3; run on an idle machine)
# For user_model_a.cpp (Trainer<models::ModelA, Adadelta<>> + fit) and user_resnet20.cpp
# (Trainer<models::ResNet20, Sgd<>> + fit): compiled mode (COHORT_COMPILED_KERNELS, as linking
# cohort::kernels defines it) at -O2, and header-only at -O3 -march=native. Prints the median
# wall time and peak memory of `runs` compilations each, as markdown rows.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
CXX=${CXX:-g++}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| unit | mode | flags | median s | runs (s) | peak RSS MB |"
echo "|---|---|---|---:|---|---:|"
for unit in user_model_a user_resnet20; do
  for mode in compiled header-only; do
    # compiled: what linking cohort::kernels defines (backend/cpu/compiled_kernels.hpp, simd.hpp).
    if [ "$mode" = compiled ]; then flags=(-O2 -DCOHORT_COMPILED_KERNELS=1 -DCOHORT_CPU_ALL_ISAS=1); else flags=(-O3 -march=native); fi
    times=()
    rss=0
    for _ in $(seq "$runs"); do
      /usr/bin/time -f "%e %M" -o "$out/time" "$CXX" -std=c++20 "${flags[@]}" -Iinclude -c "bench/compile/$unit.cpp" -o "$out/$unit.o"
      read -r t m <"$out/time"
      times+=("$t")
      ((m > rss)) && rss=$m
    done
    median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "| $unit.cpp | $mode | ${flags[*]} | $median | ${times[*]} | $((rss / 1024)) |"
  done
done
