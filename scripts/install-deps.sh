#!/usr/bin/env bash
# Installs the Debian 12 packages cohort builds, tests and runs with. Idempotent.
#   scripts/install-deps.sh
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build ccache pkg-config git ca-certificates \
  libxtensor-dev xtl-dev libxsimd-dev doctest-dev libcli11-dev zlib1g-dev \
  libpng-dev libjpeg62-turbo-dev \
  libopenmpi-dev openmpi-bin libopenblas-dev \
  dataset-fashion-mnist \
  python3 python3-venv python3-pip \
  clang-format \
  clang-14 libclang-rt-14-dev llvm >/dev/null
# libpng-dev + libjpeg62-turbo-dev: the optional image component (cohort::image: ImageFolder).
# ninja-build: the build (its .ninja_log gives scripts/compile_times.py the time of every unit);
# ccache: a second clone on the same machine reuses the first one's objects (scripts/test.sh).
# clang-14 + libclang-rt-14-dev: the libFuzzer targets (tests/fuzz/, ctest label fuzz) and
# their sanitizer runtimes; llvm: llvm-symbolizer on the PATH, for file:line in sanitizer
# reports. The asan.* and tsan.* groups use g++'s runtimes (libasan8, libubsan1, libtsan2, which
# build-essential brings).
echo "install-deps: Debian packages installed"
