#!/usr/bin/env bash
# Everything from a fresh Debian 12 machine to a tested build:
#   scripts/test.sh
# installs the packages and the Python reference (PyTorch), configures, builds every test binary
# once, runs the whole suite with ctest, and says which test groups ran: it fails when a group
# this machine can run is missing (scripts/test_groups.py), and says loudly what it cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
scripts/install-deps.sh
scripts/install-python.sh
JOBS=$(nproc)

# The groups every machine set up by the two scripts above runs.
groups=(cpu device_omp mpi packaging format asan tsan fuzz)
# -Werror on the project's own programs: a new compiler warning fails the run.
# Compiled mode (the kernel library, cohort::kernels): the registered networks' kernels are
# compiled once, not in every test unit (issue 32).
# The benchmarks are compiled, never run, here: at -O0 (COHORT_BENCH_COMPILE_ONLY; they refuse to
# measure in this tree).
# The device example (train_on_device_omp), which only its output check runs here, at -O1
# (COHORT_EXAMPLES_CHECK_ONLY).
# GCC's garbage collector only above 4 GB per unit (COHORT_COMPILER_LARGE_HEAP): 10-13% less
# compiler time for a unit measured alone, the same objects (a cold run showed less: RESULTS.md,
# "Compile time"); the largest unit took 2.6 GB.
# The tree is built at -O1 -fexpensive-optimizations, not the Release default -O3, everywhere
# (kernel library, tests, examples: one level in every program), for compiler time (issue 32):
# -O3 -> -O2 was 20% less per unit (residual.cpp 52.7 -> 42.5 s), -O2 -> this another 30% (a
# cohort_tests batch 44.6 -> 30.9 s, the kernel library 178 -> 126 compiler-s) for 1-2 s more of
# cohort_tests' 23 s run. -fexpensive-optimizations because GCC contracts a*b+c into FMA only with
# it (its widening-multiply pass; plain -O1 does not): the tests then check the arithmetic users'
# -O2/-O3 builds do. GCC reorders no floating-point arithmetic at any of these levels.
cmake_args=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -fexpensive-optimizations -DNDEBUG"
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" -DCOHORT_WARNINGS_AS_ERRORS=ON
  -DCOHORT_KERNEL_LIBRARY=ON -DCOHORT_BENCH_COMPILE_ONLY=ON -DCOHORT_EXAMPLES_CHECK_ONLY=ON
  -DCOHORT_COMPILER_LARGE_HEAP=ON)
# The device tests need the CCCL headers (Thrust): the CUDA toolkit's, or, without a toolkit,
# the same CCCL release from PyPI that install-python.sh put into .venv.
if [ ! -e /usr/local/cuda/include/cccl/thrust/device_vector.h ]; then
  cccl=$(.venv/bin/python scripts/cccl_include.py)
  echo "test.sh: no CUDA toolkit at /usr/local/cuda: the device tests use CCCL from PyPI ($cccl)"
  cmake_args+=(-DCOHORT_CCCL_INCLUDE_DIR="$cccl")
fi
# The CUDA build (nvcc) can only be checked where the toolkit is installed.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  groups+=(cuda-compile)
  # Device code for sm_90 only (the GPU runs so far: H200); the project's default builds sm_80
  # too. cohort's CUDA code has no architecture-specific path, and the second architecture cost
  # a quarter of the suite's nvcc time (issue 32).
  cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES=90)
  # Without a GPU the CUDA programs only compile here (cuda.all_tests reports skipped): their
  # host code at -O0 and their device code at -Ofc=max (COHORT_CUDA_COMPILE_ONLY, issue 32). With a
  # GPU they are built as users'.
  if ! nvidia-smi -L >/dev/null 2>&1; then
    cmake_args+=(-DCOHORT_CUDA_COMPILE_ONLY=ON)
  fi
else
  echo "test.sh: WARNING: no nvcc on this machine: the CUDA build (group cuda-compile) is NOT checked here"
fi
echo "test.sh: groups this machine must run: ${groups[*]}"

# Ninja (per-step times in build/.ninja_log: scripts/compile_times.py build prints the slowest).
cmake_args+=(-G Ninja)
# A compiler cache where one is installed (install-deps.sh installs Debian's ccache). Keyed on
# paths relative to this checkout (base_dir; no compile line holds an absolute source path, and
# hash_dir off for the -g1 sanitizer units), so a second fresh clone on this machine compiles
# nothing the first one compiled.
if command -v ccache >/dev/null; then
  # pch_defines,time_macros: what ccache needs to cache units built with cohort_tests' PCH.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  cmake_args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  ccache --zero-stats >/dev/null
fi
cmake -S . -B build "${cmake_args[@]}" >/dev/null
start=$(date +%s)
cmake --build build -j "$JOBS"
echo "test.sh: build took $(($(date +%s) - start)) s"
if command -v ccache >/dev/null; then
  ccache --show-stats | grep -iE "^ *(hits|misses|cacheable|direct|preprocessed)" | sed 's/^ */test.sh: ccache: /' || true
fi
python3 scripts/compile_times.py build -n 10 | sed 's/^/test.sh: /' || true
status=0
ctest --test-dir build --output-on-failure -j "$JOBS" --output-junit ctest-junit.xml || status=$?
python3 scripts/test_groups.py build/ctest-junit.xml --require "${groups[@]}" || status=1
echo "test.sh: everything took $(($(date +%s) - t0)) s"
exit $status
