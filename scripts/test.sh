#!/usr/bin/env bash
# Everything from a fresh Debian 12 machine to a tested build:
#   scripts/test.sh
# installs the packages and the Python reference (PyTorch), configures, builds every test binary
# once and runs the whole suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-python.sh
JOBS=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
start=$(date +%s)
cmake --build build -j "$JOBS"
echo "test.sh: build took $(( $(date +%s) - start )) s"
ctest --test-dir build --output-on-failure -j "$JOBS"
