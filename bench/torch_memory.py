#!/usr/bin/env python3
"""PyTorch's side of bench/memory.cpp: the 3x32x32 ResNet-20 (tests/reference/cohort_modules.py's
resnet20(in_channels=3), cohort's CifarResNet20 layer for layer) trained --steps steps at --batch
(SGD, momentum 0.9, weight decay 5e-4) on the same Fashion-MNIST images made 3x32x32, then
evaluated on the 10,000 test images at --eval-batch under torch.no_grad() in eval mode.

    python3 bench/torch_memory.py --steps 100 --batch 128 --eval-batch 1000 --threads 2 [--layout channels_last]

Prints one JSON line with the peak resident memory (ru_maxrss) after loading the data, after
training and after evaluation, as cohort_memory does.
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train_mnist import find, read_idx  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from cohort_modules import resnet20  # noqa: E402


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cifar_shaped(images, n, mean, std):
    """The first n images normalised, padded by 2 (a raw 0 pixel, normalised) and repeated over 3 channels."""
    x = (images[:n].astype(np.float32) / 255.0 - mean) / std
    x = np.pad(x, ((0, 0), (2, 2), (2, 2)), constant_values=(0.0 - mean) / std)
    return torch.from_numpy(np.ascontiguousarray(np.repeat(x[:, None], 3, axis=1)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--eval-batch", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layout", default="contiguous", choices=["contiguous", "channels_last"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    train_images = read_idx(find(a.data_dir, "train-images-idx3-ubyte"))
    # Mean and std of pixel / 255 from the 256-bin histogram: no float copy of the 47 M pixels (which would
    # put hundreds of MB of temporaries into the peak that cohort's data loading does not have).
    counts = np.bincount(train_images.ravel(), minlength=256).astype(np.float64)
    levels = np.arange(256) / 255.0
    mean = float((counts * levels).sum() / counts.sum())
    std = float(np.sqrt((counts * (levels - mean) ** 2).sum() / counts.sum()))
    n = a.steps * a.batch
    xtr = cifar_shaped(train_images, n, mean, std)
    ytr = torch.from_numpy(read_idx(find(a.data_dir, "train-labels-idx1-ubyte"))[:n].astype(np.int64))
    xte = cifar_shaped(read_idx(find(a.data_dir, "t10k-images-idx3-ubyte")), 10000, mean, std)
    yte = torch.from_numpy(read_idx(find(a.data_dir, "t10k-labels-idx1-ubyte"))[:10000].astype(np.int64))
    del train_images
    after_data = peak_mib()

    fmt = torch.channels_last if a.layout == "channels_last" else torch.contiguous_format
    net = resnet20(in_channels=3).to(memory_format=fmt)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    t0 = time.perf_counter()
    net.train()
    order = torch.randperm(n)
    for s in range(a.steps):
        idx = order[s * a.batch:(s + 1) * a.batch]
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(net(xtr[idx].contiguous(memory_format=fmt)), ytr[idx]).backward()
        opt.step()
    t1 = time.perf_counter()
    after_train = peak_mib()
    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xte), a.eval_batch):
            correct += int((net(xte[i:i + a.eval_batch].contiguous(memory_format=fmt)).argmax(1)
                            == yte[i:i + a.eval_batch]).sum())
    t2 = time.perf_counter()
    print(json.dumps({"bench": "memory", "framework": "pytorch", "torch": torch.__version__, "layout": a.layout,
                      "model": "resnet20(in_channels=3)", "steps": a.steps, "batch": a.batch,
                      "eval_batch": a.eval_batch, "threads": a.threads, "data_mib": after_data,
                      "peak_after_train_mib": after_train, "peak_mib": peak_mib(), "train_s": t1 - t0,
                      "eval_s": t2 - t1, "test_accuracy": 100.0 * correct / len(xte)}))


if __name__ == "__main__":
    main()
