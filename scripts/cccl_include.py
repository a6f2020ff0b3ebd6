#!/usr/bin/env python3
"""Prints the include directory of the CCCL headers (Thrust, CUB, libcu++) that PyPI's
nvidia-cuda-cccl wheel installed into this interpreter's environment (install-python.sh installs
it where no CUDA toolkit is): what CMake's COHORT_CCCL_INCLUDE_DIR takes."""
import os
import sys

import nvidia  # namespace package of NVIDIA's wheels

for root in nvidia.__path__:
    for sub in ("cu13", "cu12", ""):
        path = os.path.join(root, sub, "include", "cccl")
        if os.path.exists(os.path.join(path, "thrust", "device_vector.h")):
            print(path)
            sys.exit(0)
sys.exit("cccl_include: nvidia-cuda-cccl is installed but its include/cccl was not found")
