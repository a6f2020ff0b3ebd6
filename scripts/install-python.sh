#!/usr/bin/env bash
# Creates .venv with what the tests and benchmarks compare against: PyTorch (CPU use only),
# numpy and safetensors.
#   scripts/install-python.sh            -> .venv/bin/python
#
# PyPI's torch wheel pulls several GB of CUDA libraries. Where the CUDA 13 toolkit is already
# installed (/usr/local/cuda, as on the CI machines), only the four libraries the toolkit lacks
# are added (about 1.4 GB in all); elsewhere the full wheel is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION="2.15.0"
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
PY=.venv/bin/python
$PY -m pip install -q --disable-pip-version-check numpy safetensors
if ! $PY -c "import torch" 2>/dev/null; then
  if [ -e /usr/local/cuda/lib64/libcudart.so.13 ] || ldconfig -p | grep -q libcudart.so.13; then
    $PY -m pip install -q --disable-pip-version-check --no-deps "torch==${TORCH_VERSION}" \
      nvidia-cusparselt-cu13==0.10.0 nvidia-nvshmem-cu13==3.8.0 nvidia-cufile==1.20.0.107 nvidia-nccl-cu13==2.32.3
    $PY -m pip install -q --disable-pip-version-check filelock typing-extensions sympy networkx jinja2 fsspec
  else
    $PY -m pip install -q --disable-pip-version-check "torch==${TORCH_VERSION}"
  fi
fi
$PY -c "import torch; print('install-python: torch', torch.__version__, 'ready in .venv')"
