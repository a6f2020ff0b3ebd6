#!/usr/bin/env bash
# Everything from a fresh Debian 12 machine to a trained model:
#   scripts/quickstart.sh [train_mnist options...]
# installs the packages (compiler, CMake, xtensor, CLI11, zlib, Fashion-MNIST), builds the example
# trainer and trains seed 000's model A on Fashion-MNIST for 2 epochs, printing the epoch times
# and the test accuracy. Extra arguments go to train_mnist (try --help, --threads 2, --model C).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target train_mnist
exec build/examples/train_mnist --model A --epochs 2 --log-interval 100 "$@"
