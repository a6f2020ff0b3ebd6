#!/usr/bin/env bash
# Creates .venv with what the tests and benchmarks compare against: PyTorch (CPU use only),
# numpy and safetensors; Conan 2, which the packaging.conan_create test runs; and, on a machine
# without the CUDA toolkit, the CCCL headers the device tests compile against.
#   scripts/install-python.sh            -> .venv/bin/python
#
# PyPI's torch wheel pulls several GB of CUDA libraries. Where the CUDA 13 toolkit is already
# installed (/usr/local/cuda, as on the CI machines), only the four libraries the toolkit lacks
# are added (about 1.4 GB in all); elsewhere the full wheel is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION="2.15.0"
CONAN_VERSION="2.34.0"
CCCL_VERSION="13.0.85" # the CCCL of the CUDA 13.0 toolkit CI compiles with
# One environment per machine and set of pins, not per clone: it lives in a cache keyed by this
# script's contents (the versions it pins) and .venv links to it, so a second clone on this
# machine skips the 67 s of rebuilding it from pip's cache (issue 32). An existing .venv
# directory is kept as it is; COHORT_VENV_CACHE=off makes a private one, COHORT_VENV_CACHE=<dir>
# moves the cache. (A changed pin makes a new environment; old ones stay until deleted.)
# (No writable cache directory, no HOME: a private .venv as before.)
# A link left dangling (the cache was deleted) is dropped and made again.
if [ -L .venv ] && [ ! -e .venv ]; then rm .venv; fi
cache_root=""
if [ -n "${COHORT_VENV_CACHE:-}" ]; then cache_root="$COHORT_VENV_CACHE"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then cache_root="$XDG_CACHE_HOME/cohort"
elif [ -n "${HOME:-}" ]; then cache_root="$HOME/.cache/cohort"
fi
if [ ! -e .venv ] && [ "${COHORT_VENV_CACHE:-}" != off ] && [ -n "$cache_root" ] &&
  mkdir -p "$cache_root" 2>/dev/null && [ -w "$cache_root" ]; then
  shared="$cache_root/venv-$(sha256sum scripts/install-python.sh | cut -c1-16)"
  exec 9>"$shared.lock" # two clones setting up at once: the second waits for the first
  flock 9
  if [ ! -x "$shared/bin/python" ]; then python3 -m venv "$shared"; fi
  ln -s "$shared" .venv
  echo "install-python: .venv -> $shared (shared by this machine's clones)"
fi
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
PY=.venv/bin/python
LOG=$(mktemp)
pip_install() {  # quiet unless it fails (--no-deps installs make pip print resolver warnings)
  if ! $PY -m pip install --disable-pip-version-check "$@" >"$LOG" 2>&1; then cat "$LOG"; exit 1; fi
}
pip_install numpy safetensors matplotlib onnxruntime==1.32.0 onnx==1.23.2
if ! $PY -c "import torch" 2>/dev/null; then
  if [ -e /usr/local/cuda/lib64/libcudart.so.13 ] || ldconfig -p | grep -q libcudart.so.13; then
    # The versions torch 2.15.0 pins, minus everything the toolkit already provides.
    pip_install --no-deps "torch==${TORCH_VERSION}" nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 \
      nvidia-cufile==1.20.0.107 nvidia-nccl-cu13==2.30.7
    pip_install filelock typing-extensions sympy networkx jinja2 fsspec
  else
    pip_install "torch==${TORCH_VERSION}"
  fi
fi
# The device tests (Thrust on OpenMP) need the CCCL headers: the CUDA toolkit has them; without one,
# the same CCCL release (CUDA 13.0's) from PyPI (scripts/cccl_include.py finds it).
# torchvision (its ResNet-18 is a reference, tests/reference/torchvision_resnet.py) without its pinned
# torch: the one above serves it; Pillow is the only other module it imports.
if ! $PY -c "import torchvision" 2>/dev/null; then
  pip_install --no-deps torchvision==0.29.2 pillow==13.0.0
fi
if [ ! -e /usr/local/cuda/include/cccl/thrust/device_vector.h ] && ! $PY scripts/cccl_include.py >/dev/null 2>&1; then
  pip_install "nvidia-cuda-cccl==${CCCL_VERSION}"
  echo "install-python: CCCL ${CCCL_VERSION} headers from PyPI in $($PY scripts/cccl_include.py)"
fi
# Conan 2 for the packaging.conan_create ctest (conanfile.py, test_package/, conan/profiles/).
if [ "$(.venv/bin/conan --version 2>/dev/null)" != "Conan version ${CONAN_VERSION}" ]; then
  pip_install "conan==${CONAN_VERSION}"
fi
.venv/bin/conan --version | sed 's/^/install-python: /'
$PY -c "import torch; print('install-python: torch', torch.__version__, 'ready in .venv')"
