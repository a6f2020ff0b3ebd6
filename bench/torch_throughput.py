#!/usr/bin/env python3
"""PyTorch twin of cohort_throughput: same models, optimisers, batch and timing protocol.

    python3 bench/torch_throughput.py --model A --batch 128 --mode train --threads 1
"""
import argparse
import json
import os
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def model(name):
    if name == "A":
        return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Dropout2d(0.1), nn.Flatten(), nn.Linear(4608, 64), nn.ReLU(), nn.Dropout(0.25),
                             nn.Linear(64, 10), nn.LogSoftmax(dim=1))
    if name == "B":
        return nn.Sequential(nn.Conv2d(1, 16, 5, 1, 2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2, 2),
                             nn.Conv2d(16, 32, 5, 1, 2), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2, 2),
                             nn.Flatten(), nn.Linear(1568, 10))
    if name == "C":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(6272, 64), nn.ReLU(), nn.Linear(64, 10))
    return nn.Sequential(nn.Conv2d(1, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(256, 512, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(4608, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="A", choices="ABCD")
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    net = model(a.model)
    if a.model == "A":
        opt, loss_fn = torch.optim.Adadelta(net.parameters(), lr=0.5), F.nll_loss
    elif a.model == "B":
        opt, loss_fn = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9), F.cross_entropy
    else:
        opt, loss_fn = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7), F.cross_entropy
    x = torch.rand(a.batch, 1, 28, 28)
    y = torch.arange(a.batch) % 10
    train = a.mode == "train"
    net.train(train)

    def step():
        if train:
            opt.zero_grad()
            loss_fn(net(x), y).backward()
            opt.step()
        else:
            with torch.no_grad():
                net(x)

    for _ in range(a.warmup):
        step()
    rates = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for _ in range(a.iters):
            step()
        rates.append(a.iters * a.batch / (time.perf_counter() - t0))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "model": a.model, "mode": a.mode,
                      "batch": a.batch, "threads": a.threads, "mkl_threads": os.environ.get("MKL_NUM_THREADS"),
                      "samples_per_s": round(statistics.median(rates), 1), "peak_rss_mib": round(peak, 1)}))


if __name__ == "__main__":
    main()
