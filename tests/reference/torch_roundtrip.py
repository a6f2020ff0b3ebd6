#!/usr/bin/env python3
"""Weights travel between cohort and PyTorch through safetensors, both ways.

    python3 tests/reference/torch_roundtrip.py HELPER WORKDIR

For model B, ResNet-20 (its blocks' nested names, cohort_modules.resnet20), the CIFAR ResNet-20
(models::CifarResNet20, 3x32x32 inputs) and two U-Nets (cohort_modules.unet: Concat's nested
names; bilinear with BatchNorm, and ConvTranspose2d with GroupNorm, which has no counter):
1. cohort writes the model's weights (state_dict names, F32 and I64 num_batches_tracked);
   PyTorch loads them into its twin with load_state_dict(strict=True) and must compute
   cohort's output (eval mode) on the same batch.
2. PyTorch changes every tensor, saves with safetensors.torch.save_file; cohort loads the file
   strictly and must compute PyTorch's output.
Exit 77 (ctest: skipped) when torch or safetensors is missing.
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)


def model_b():
    return nn.Sequential(nn.Conv2d(1, 16, 5, 1, 2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Conv2d(16, 32, 5, 1, 2), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Flatten(), nn.Linear(1568, 10))


def roundtrip(helper, work, name, m, counter, image=(1, 28, 28)):
    """Both ways for one model; `counter`: a num_batches_tracked key it holds (None: it has no
    BatchNorm); `image`: its input's (C, H, W). Returns 0 on success."""
    x = torch.from_numpy(np.random.default_rng(0).random((6, *image), dtype=np.float32))
    save_file({"x": x}, os.path.join(work, "x.safetensors"))

    # cohort -> PyTorch
    subprocess.run([helper, name, "export", os.path.join(work, "cohort_w.safetensors"),
                    os.path.join(work, "x.safetensors"), os.path.join(work, "cohort_y.safetensors")], check=True)
    sd = load_file(os.path.join(work, "cohort_w.safetensors"))
    m.load_state_dict(sd, strict=True)
    assert counter is None or (sd[counter].dtype == torch.int64 and int(sd[counter]) == 1)
    m.eval()
    with torch.no_grad():
        y = m(x)
    ref = load_file(os.path.join(work, "cohort_y.safetensors"))["y"].reshape(y.shape)
    err = float((y - ref).abs().max() / ref.abs().max())
    print(f"{name}: PyTorch on cohort-written weights: worst difference {err:.3g} of the largest output")
    if err > 1e-5:
        return 1

    # PyTorch -> cohort
    with torch.no_grad():
        for k, v in m.state_dict().items():
            if v.dtype.is_floating_point:
                v.mul_(0.9).add_(0.01)
            else:
                v.add_(5)
        y2 = m(x)
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, os.path.join(work, "torch_w.safetensors"))
    save_file({"y": y2}, os.path.join(work, "torch_y.safetensors"))
    return subprocess.run([helper, name, "check", os.path.join(work, "torch_w.safetensors"),
                           os.path.join(work, "x.safetensors"), os.path.join(work, "torch_y.safetensors")]).returncode


def main():
    helper, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cohort_modules import resnet20, unet
    return (roundtrip(helper, work, "B", model_b(), "1.num_batches_tracked")
            or roundtrip(helper, work, "resnet20", resnet20(), "3.body.1.num_batches_tracked")
            or roundtrip(helper, work, "cifar20", resnet20(in_channels=3), "3.body.1.num_batches_tracked", (3, 32, 32))
            or roundtrip(helper, work, "unet", unet(1, 3, 4, 2), "6.second.7.second.2.num_batches_tracked",
                         (1, 16, 16))
            or roundtrip(helper, work, "unet_paper", unet(1, 3, 8, 2, "transposed", "group"), None, (1, 16, 16)))


if __name__ == "__main__":
    sys.exit(main())
