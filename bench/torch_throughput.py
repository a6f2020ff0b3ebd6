#!/usr/bin/env python3
"""PyTorch twin of cohort_throughput: same models, optimisers, batch, FLOP count and timing protocol.

    python3 bench/torch_throughput.py --model A --mode train --batch 128 --threads 1
    python3 bench/torch_throughput.py --model C --mode infer --batch 1000 --threads 2 --blas-threads 1
    python3 bench/torch_throughput.py --model B --channels-last --fused     # PyTorch's faster modes
    python3 bench/torch_throughput.py --model D --compile --fused

Data (--data): real (the default) is Fashion-MNIST's training set, normalised (the set's mean and
std, as cohort's Normalization::of), shuffled once (numpy default_rng(0)) and cut into consecutive
batches that rotate through all 60,000 images, as cohort_throughput does (each side shuffles with
its own generator); synthetic is one fixed batch of uniform [0, 1) values stepped repeatedly.
Modes: --channels-last (model and inputs in torch.channels_last), --compile (torch.compile of the
model; its compilation happens in the untimed warm-up), --fused (the optimiser's fused=True where
torch has one for it: SGD and Adam; Adadelta has none and keeps its default foreach path).
--flush-denormal: torch.set_flush_denormal(True) before any thread starts.

Training: zero_grad + forward + loss + backward + the seed's optimiser step, train mode.
Inference: eval mode under torch.no_grad(), forward only. `--warmup` untimed steps, then `--repeats`
timed windows of `--iters` steps; the median window's rate is reported. Prints one JSON line.

Threads: torch.set_num_threads(--threads). PyTorch's set_num_threads also sets MKL's thread count,
so MKL_NUM_THREADS=1 in the environment alone does not hold BLAS to one thread; --blas-threads N
re-applies N through MKL's own mkl_set_num_threads_local after PyTorch's lazy thread set-up
(the JSON records the MKL thread count seen before and after the timed windows).
"""
import argparse
import ctypes
import gzip
import json
import math
import os
import resource
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def model(name):
    """The seed notebooks' models as torch.nn.Sequential (cohort's models A-D)."""
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


def flops_per_sample(net, input_shape=(1, 28, 28)):
    """(forward, training) FLOPs per sample, bench/flops.hpp's convention: 2 x multiply-adds of
    Conv2d and Linear only; training = forward + weight gradients (= forward) + input gradients
    (= forward, except for module 0, whose input gradient is never computed)."""
    out_numel = {}
    hooks = [m.register_forward_hook(lambda mod, inp, out, i=i: out_numel.__setitem__(i, out[0].numel()))
             for i, m in enumerate(net) if isinstance(m, nn.Conv2d)]
    was_training = net.training
    net.eval()
    with torch.no_grad():
        net(torch.zeros(1, *input_shape))
    net.train(was_training)
    for h in hooks:
        h.remove()
    per_layer = {}
    for i, m in enumerate(net):
        if isinstance(m, nn.Conv2d):
            per_layer[i] = 2 * out_numel[i] * (m.in_channels // m.groups) * math.prod(m.kernel_size)
        elif isinstance(m, nn.Linear):
            per_layer[i] = 2 * m.in_features * m.out_features
    forward = sum(per_layer.values())
    return forward, 3 * forward - per_layer.get(0, 0)


def real_batches(data_dir, batch):
    """Fashion-MNIST's training set as (count, batch, 1, 28, 28) images and (count, batch) labels."""
    def read_idx(stem):
        for name in (stem, stem + ".gz"):
            path = os.path.join(data_dir, name)
            if os.path.exists(path):
                with (gzip.open if name.endswith(".gz") else open)(path, "rb") as f:
                    data = f.read()
                dims = data[3]
                shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
                return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)
        raise SystemExit(f"torch_throughput: no {stem}[.gz] in {data_dir}")
    x = read_idx("train-images-idx3-ubyte").astype(np.float32) / 255.0
    y = read_idx("train-labels-idx1-ubyte").astype(np.int64)
    x = (x - x.mean()) / x.std()
    order = np.random.default_rng(0).permutation(len(y))
    count = len(y) // batch
    order = order[:count * batch]
    xs = torch.from_numpy(np.ascontiguousarray(x[order])).reshape(count, batch, 1, 28, 28)
    ys = torch.from_numpy(np.ascontiguousarray(y[order])).reshape(count, batch)
    return xs, ys


def mkl():
    """MKL's get/set-threads entry points inside libtorch_cpu (None where PyTorch has no MKL)."""
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        return lib.mkl_get_max_threads, lib.mkl_set_num_threads_local
    except (OSError, AttributeError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="A", choices="ABCD")
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--iters", type=int, default=20, help="steps per timed window")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--repeats", type=int, default=3, help="timed windows (the median is reported)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="hold MKL (PyTorch's BLAS: Linear layers) to this many threads (0: PyTorch's choice)")
    ap.add_argument("--data", default="real", choices=["real", "synthetic"])
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--channels-last", action="store_true", help="model and inputs in channels_last")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--fused", action="store_true", help="fused optimiser where torch has one (SGD, Adam)")
    ap.add_argument("--flush-denormal", action="store_true", help="torch.set_flush_denormal(True)")
    a = ap.parse_args()
    if a.flush_denormal and not torch.set_flush_denormal(True):
        raise SystemExit("torch_throughput: this CPU cannot flush denormals")
    torch.set_num_threads(a.threads)
    torch.zeros(1 << 16).add_(1)  # a parallel op: PyTorch's per-thread lazy set-up, which resets MKL's count
    mkl_fns = mkl()
    if a.blas_threads:
        if mkl_fns is None:
            raise SystemExit("torch_throughput: --blas-threads needs a PyTorch built with MKL")
        mkl_fns[1](ctypes.byref(ctypes.c_int(a.blas_threads)))
    mkl_threads_before = mkl_fns[0]() if mkl_fns else None

    torch.manual_seed(0)
    net = model(a.model)
    fwd_flops, train_flops = flops_per_sample(net)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    net = net.to(memory_format=fmt)
    fused = {"fused": True} if a.fused else {}
    if a.model == "A":
        opt, loss_fn = torch.optim.Adadelta(net.parameters(), lr=0.5), F.nll_loss
    elif a.model == "B":
        opt, loss_fn = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, **fused), F.cross_entropy
    else:
        opt, loss_fn = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7, **fused), F.cross_entropy
    if a.data == "real":
        xs, ys = real_batches(a.data_dir, a.batch)
    else:
        xs, ys = torch.rand(1, a.batch, 1, 28, 28), (torch.arange(a.batch) % 10).unsqueeze(0)
    xs = [xb.contiguous(memory_format=fmt) for xb in xs]  # laid out once, outside the timing
    train = a.mode == "train"
    net.train(train)
    run = torch.compile(net) if a.compile else net
    passes = [0]

    def step():
        k = passes[0] % len(xs)
        passes[0] += 1
        x, y = xs[k], ys[k]
        if train:
            opt.zero_grad()
            loss_fn(run(x), y).backward()
            opt.step()
        else:
            with torch.no_grad():
                run(x)

    for _ in range(a.warmup):
        step()
    rates = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for _ in range(a.iters):
            step()
        rates.append(a.iters * a.batch / (time.perf_counter() - t0))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    median = sorted(rates)[len(rates) // 2]  # as cohort_throughput: the upper median for an even count
    flops = train_flops if train else fwd_flops
    print(json.dumps({
        "framework": "pytorch", "torch": torch.__version__, "data": a.data, "batches_in_rotation": len(xs),
        "channels_last": a.channels_last, "compile": a.compile, "fused": a.fused,
        "flush_denormal": a.flush_denormal, "model": a.model, "mode": a.mode, "batch": a.batch,
        "threads": torch.get_num_threads(), "blas_threads": a.blas_threads or None,
        "mkl_threads": [mkl_threads_before, mkl_fns[0]() if mkl_fns else None],
        "env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ},
        "warmup": a.warmup, "iters": a.iters, "repeats": a.repeats,
        "samples_per_s": round(median, 1), "window_samples_per_s": [round(r, 1) for r in rates],
        "ms_per_step": round(1e3 * a.batch / median, 3), "flops_per_sample": flops,
        "gflops": round(median * flops / 1e9, 2), "peak_rss_mib": round(peak, 1)}))


if __name__ == "__main__":
    main()
