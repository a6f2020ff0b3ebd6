#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a GPU machine that has CUDA, CMake and PyTorch but no
# Debian packages and no network (the `device` tool's machines): the headers and CMake configs of
# xtensor, xtl, doctest and zlib, and the Fashion-MNIST IDX files, into .gpu-deps/ (in .gitignore:
# carry it). Run it here, on the Debian machine with scripts/install-deps.sh's packages:
#
#   scripts/gpu-pack.sh            # then, on the GPU machine: scripts/gpu-check.sh
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
du -sh "$out"
