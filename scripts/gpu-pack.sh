#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU machine that has CUDA, CMake and PyTorch but no
# Debian packages and no network (the `device` tool's machines): the headers and CMake configs of
# xtensor, xtl, doctest and zlib, and the Fashion-MNIST IDX files, into .gpu-deps/ (in .gitignore:
# carry it). Run it here, on the Debian machine with scripts/install-deps.sh's packages:
#
#   scripts/gpu-pack.sh            # then, on the GPU machine: scripts/gpu-check.sh
#   scripts/gpu-pack.sh --prebuilt build-sm90
#                                  # also the CUDA binaries built here (xz) and the MPI libraries
#                                  # they link; there: GPU_BUILD_DIR=build-sm90 scripts/gpu-check.sh prebuilt
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
  tar -cJf "$out/prebuilt.tar.xz" "$b/tests/cohort_cuda_tests" "$b/examples/train_on_device_cuda" "$b/CMakeCache.txt"
  mkdir -p "$out/lib"
  # What the binaries link beyond CUDA, the C++ runtime and glibc: OpenMPI 4 and its helpers.
  ldd "$b/tests/cohort_cuda_tests" | awk '/=> \//{print $3}' |
    grep -E 'lib(mpi|open-rte|open-pal|hwloc|event_core|event_pthreads)[^/]*$' | xargs -r cp -L -t "$out/lib"
fi
du -sh "$out"
