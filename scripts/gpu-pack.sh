#!/usr/bin/env bash
# Packs what `scripts/gpu-check.sh all` needs on a GPU machine that has CUDA and PyTorch but no
# Debian packages and no network (the `device` tool's machines) into .gpu-deps/ (in .gitignore:
# carry it; the run carries at most 64 MiB in all, so this script fails above 56 MiB):
#   - the headers and CMake configs of xtensor, xtl, doctest and zlib (for gpu-check.sh build)
#   - the Fashion-MNIST IDX files
#   - with --prebuilt BUILD_DIR: the CUDA programs built here (xz): cohort_cuda_tests,
#     train_on_device_cuda, cohort_nccl_two_ranks; the MPI libraries they link; the build
#     directory's name and the commit; and the losses of the correctness stage (ResNet-20, 50
#     steps in file order, fp32 and bf16) on the CPU backend (train_mnist) and on the device
#     kernels through OpenMP (train_on_device_omp), of BUILD_DIR, else of build/
#
#   cmake -S . -B build-sm90 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
#         -DCOHORT_CUDA_COMPILE_ONLY=OFF
#   cmake --build build-sm90 --target cohort_cuda_tests train_on_device_cuda cohort_nccl_two_ranks train_mnist \
#         train_on_device_omp
#   scripts/gpu-pack.sh --prebuilt build-sm90      # then, there: scripts/gpu-check.sh all
set -euo pipefail
cd "$(dirname "$0")/.."
out=.gpu-deps
rm -rf "$out"
mkdir -p "$out/prefix" "$out/fashion-mnist"
# Keep each file's path below /usr: the CMake configs find their headers relative to themselves.
copy() { for p in "$@"; do [ -e "/usr/$p" ] && mkdir -p "$out/prefix/$(dirname "$p")" && cp -a "/usr/$p" "$out/prefix/$p"; done; }
copy include/xtensor include/xtl include/doctest include/zlib.h include/zconf.h \
  lib/x86_64-linux-gnu/cmake/xtensor lib/x86_64-linux-gnu/cmake/xtl share/cmake/xtl lib/cmake/xtl \
  lib/cmake/doctest
cp /usr/share/datasets/fashion-mnist/*ubyte* "$out/fashion-mnist/"
if [ "${1:-}" = --prebuilt ]; then
  b=${2:?usage: gpu-pack.sh --prebuilt BUILD_DIR}
  if grep -q '^COHORT_CUDA_COMPILE_ONLY:BOOL=ON' "$b/CMakeCache.txt"; then
    echo "gpu-pack: $b builds the CUDA programs' host code at -O0 (COHORT_CUDA_COMPILE_ONLY=ON, for machines" \
      "that only compile them): reconfigure it with -DCOHORT_CUDA_COMPILE_ONLY=OFF" >&2
    exit 1
  fi
  programs=("$b/tests/cohort_cuda_tests" "$b/examples/train_on_device_cuda" "$b/tests/cohort_nccl_two_ranks")
  for p in "${programs[@]}"; do
    [ -x "$p" ] || { echo "gpu-pack: $p is not built" >&2; exit 1; }
  done
  tar -cJf "$out/prebuilt.tar.xz" "${programs[@]}" "$b/CMakeCache.txt"
  echo "$b" >"$out/build_dir"
  git rev-parse --short HEAD >"$out/commit"
  mkdir -p "$out/lib"
  # What the binaries link beyond CUDA, the C++ runtime and glibc: OpenMPI 4 and its helpers.
  for p in "${programs[@]}"; do ldd "$p"; done | awk '/=> \//{print $3}' | sort -u |
    grep -E 'lib(mpi|open-rte|open-pal|hwloc|event_core|event_pthreads)[^/]*$' | xargs -r cp -L -t "$out/lib"
  # The correctness stage's CPU side, the same 50 steps twice: on the CPU backend (the reference)
  # and on the device kernels through Thrust's OpenMP system (the envelope: how far two correct
  # implementations with different algorithms drift apart as training amplifies rounding; about
  # 8 minutes per precision on 2 cores).
  mnist=$b/examples/train_mnist
  [ -x "$mnist" ] || mnist=build/examples/train_mnist
  omp=$b/examples/train_on_device_omp
  [ -x "$omp" ] || omp=build/examples/train_on_device_omp
  for p in "$mnist" "$omp"; do
    [ -x "$p" ] || { echo "gpu-pack: no $(basename "$p") in $b or build/ for the CPU reference losses" >&2; exit 1; }
  done
  mkdir -p "$out/reference"
  steps=(--model resnet --max-steps 50 --no-shuffle --log-interval 1 --data-dir /usr/share/datasets/fashion-mnist)
  for p in fp32 bf16; do
    "$mnist" "${steps[@]}" --precision "$p" --epochs 1 >"$out/reference/resnet_$p.log"
    OMP_NUM_THREADS=$(nproc) "$omp" "${steps[@]}" --precision "$p" >"$out/reference/resnet_${p}_envelope.log"
    echo "gpu-pack: CPU reference and envelope ($p): $(grep -c '] *.training loss:' "$out/reference/resnet_$p.log")" \
      "and $(grep -c '] *.training loss:' "$out/reference/resnet_${p}_envelope.log") step losses"
  done
fi
du -sh "$out"
kib=$(du -sk "$out" | cut -f1)
if [ "$kib" -gt $((56 * 1024)) ]; then
  echo "gpu-pack: $out is $((kib / 1024)) MiB: more than the 56 MiB that leave room for the tree in a 64 MiB carry" >&2
  exit 1
fi
