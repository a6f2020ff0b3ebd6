#!/usr/bin/env bash
# Everything from a fresh Debian 12 machine to a trained model:
#   scripts/quickstart.sh [train_mnist options...]
# installs the packages (compiler, CMake, xtensor, CLI11, zlib, Fashion-MNIST), builds the example
# trainer and trains seed 000's model A on Fashion-MNIST for 2 epochs, printing the epoch times
# and the test accuracy. Extra arguments go to train_mnist (try --help, --threads 2, --model C).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Header-only (no kernel library): for one program that is the shorter build; train_mnist then
# compiles its kernels for this CPU's instruction set only. (scripts/test.sh switches the same
# build directory to compiled mode.) Ninja, as test.sh, so that either script can follow the other.
# The Release flags are named: test.sh sets the same directory to -O2 (its tree is for tests, not
# for speed), and a CMake cache keeps a -D value until it is given again.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG" \
  -DCOHORT_KERNEL_LIBRARY=OFF >/dev/null
cmake --build build -j "$(nproc)" --target train_mnist
exec build/examples/train_mnist --model A --epochs 2 --log-interval 100 "$@"
