#!/bin/bash
# Compiles the compiled kernel library's sources (src/cpu_kernels_*.cpp) to assembly under one
# -mtune and lists the functions whose loops touch the stack with vector registers: register
# tiles that GCC left in memory (include/cohort/backend/cpu/simd.hpp, "Register tiles").
#   scripts/register-tiles.sh [TUNE=skylake-avx512] [ROWS=30]
# Some traffic is expected (16-register AVX2 tiles, spills around calls); a direct or pointwise
# kernel near the top is the bug. ~2 minutes on 2 cores.
set -euo pipefail
tune=${1:-skylake-avx512}; rows=${2:-30}
root=$(cd "$(dirname "$0")/.." && pwd); out=$(mktemp -d)
cd "$root"
ls src/cpu_kernels_[0-9].cpp | xargs -P"$(nproc)" -I{} sh -c \
  "g++ -std=c++20 -O3 -DNDEBUG -march=native -mtune=$tune -DCOHORT_CPU_ALL_ISAS=1 -Iinclude -Isrc -S {} -o $out/\$(basename {} .cpp).s"
python3 scripts/register_tiles.py "$out" "$rows"
rm -rf "$out"
