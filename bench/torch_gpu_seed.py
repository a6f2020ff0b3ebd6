#!/usr/bin/env python3
"""PyTorch twin of `train_on_device_cuda` for scripts/gpu-check.sh: seed 000's model A (Adadelta lr
0.5, NLL, batch 128) or seed 001's model B (BatchNorm, SGD lr 1e-4, batch 100) on one GPU, one
epoch of Fashion-MNIST from tensors already on the GPU, in fp32, fp16 (autocast + GradScaler: the
amp equivalent of seed 004's Apex O2) or bf16 (autocast). Prints one JSON line: epoch time,
samples/s and test accuracy.

    python3 bench/torch_gpu_seed.py --model A --precision fp16 [--compile] [--channels-last]
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(d, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    raise SystemExit(f"torch_gpu_seed: no {stem}[.gz] in {d}")


def model(name):
    if name == "A":  # seed 000 (torch's own dropout: the timing does not depend on the masks)
        return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Dropout(0.10), nn.Flatten(), nn.Linear(4608, 64), nn.ReLU(), nn.Dropout(0.25),
                             nn.Linear(64, 10), nn.LogSoftmax(dim=1))
    return nn.Sequential(nn.Conv2d(1, 16, 5, 1, 2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Conv2d(16, 32, 5, 1, 2), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Flatten(), nn.Linear(1568, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["A", "B"], default="A")
    ap.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--channels-last", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("torch_gpu_seed: torch sees no CUDA device")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    tr = read_idx(find(a.data_dir, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    mean, std = float(tr.mean()), float(tr.std())
    norm = lambda x: torch.from_numpy((x - mean) / std).unsqueeze(1).to(dev)  # noqa: E731
    xtr = norm(tr)
    xte = norm(read_idx(find(a.data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0)
    ytr = torch.from_numpy(read_idx(find(a.data_dir, "train-labels-idx1-ubyte")).astype(np.int64)).to(dev)
    yte = torch.from_numpy(read_idx(find(a.data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64)).to(dev)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    net = model(a.model).to(dev).to(memory_format=fmt)
    batch = 128 if a.model == "A" else 100
    opt = torch.optim.Adadelta(net.parameters(), lr=0.5) if a.model == "A" else torch.optim.SGD(net.parameters(), 1e-4)
    loss_fn = F.nll_loss if a.model == "A" else F.cross_entropy
    run = torch.compile(net) if a.compile else net
    dtype = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[a.precision]
    scaler = torch.amp.GradScaler("cuda", enabled=a.precision == "fp16")
    order = torch.randperm(len(xtr), device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for b in range(0, len(order), batch):
        idx = order[b:b + batch]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(run(xtr[idx].contiguous(memory_format=fmt)), ytr[idx])
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    net.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        correct = sum(int((run(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum()) for i in range(0, len(xte), 1000))
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                      "model": a.model, "precision": a.precision, "compile": a.compile,
                      "channels_last": a.channels_last, "epoch time": seconds,
                      "samples_per_s": len(order) / seconds, "test_accuracy": 100.0 * correct / len(xte)}))


if __name__ == "__main__":
    main()
