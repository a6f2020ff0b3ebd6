#!/usr/bin/env python3
"""The PyTorch peer of bench/precision.py: trains seed model A (Adadelta 0.5) or C (Adam 1e-3,
eps 1e-7), batch 128, for --epochs epochs of Fashion-MNIST on the CPU, in fp32 or under
torch.autocast("cpu", dtype=bfloat16|float16) (PyTorch's CPU mixed precision: fp32 weights,
16-bit matmuls and convolutions where autocast chooses them). Prints one JSON line: epoch times
(training loop only), samples/s of the last epoch, test accuracy and peak resident memory.
With --max-steps N it trains 10 warm-up steps and N timed ones instead (PyTorch's CPU fp16 runs
at a few hundred samples/s: whole epochs would take most of a benchmark's time) and reports no
accuracy.

    python3 bench/torch_precision.py --model C --precision bf16 --epochs 2 --threads 2
    python3 bench/torch_precision.py --model A --precision fp16 --max-steps 100 --threads 2
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ddp_epoch import load  # noqa: E402  (IDX reader, the training set's normalisation)
from torch_throughput import model  # noqa: E402  (the seed models)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["A", "B", "C", "D"], default="A")
    ap.add_argument("--precision", choices=["fp32", "fp16", "bf16", "fp32-cl", "bf16-cl"], default="fp32",
                    help="-cl: the model and its inputs in channels_last memory format")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--max-steps", type=int, default=0, help="throughput only: 10 warm-up + N timed steps")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    tx, ty, vx, vy = load(a.data_dir)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tx, ty), batch_size=a.batch_size,
                                         shuffle=True, num_workers=0)
    channels_last = a.precision.endswith("-cl")
    a.precision = a.precision.removesuffix("-cl")
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    net = model(a.model).to(memory_format=memory_format)
    # train_mnist's defaults (the seed notebooks' recipes).
    if a.model == "A":
        opt = torch.optim.Adadelta(net.parameters(), lr=0.5)
    elif a.model == "B":
        opt = torch.optim.SGD(net.parameters(), lr=1e-4)
    else:
        opt = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    # GradScaler on the CPU for fp16 (torch >= 2.3), as cohort's MixedPrecision<fp16> scales.
    scaler = torch.amp.GradScaler("cpu") if a.precision == "fp16" else None
    epochs = []
    warmup = 10 if a.max_steps else 0
    for _ in range(1 if a.max_steps else a.epochs):
        net.train()
        start = time.perf_counter()
        for step, (x, y) in enumerate(loader):
            if step == warmup and warmup:
                start = time.perf_counter()
            if a.max_steps and step == warmup + a.max_steps:
                break
            x = x.to(memory_format=memory_format)
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                out = net(x).float()
                loss = F.nll_loss(out, y) if a.model == "A" else F.cross_entropy(out, y)
            opt.zero_grad()
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
        epochs.append(time.perf_counter() - start)
    samples = a.max_steps * a.batch_size if a.max_steps else len(ty)
    net.eval()
    correct = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
        for i in range(0, 0 if a.max_steps else len(vy), 1000):
            correct += int((net(vx[i:i + 1000].to(memory_format=memory_format)).float().argmax(1) == vy[i:i + 1000]).sum())
    print(json.dumps({"framework": "torch", "model": a.model, "precision": a.precision + ("-cl" if channels_last else ""),
                      "threads": a.threads,
                      "epoch_s": [round(e, 3) for e in epochs], "samples_per_s": round(samples / epochs[-1], 1),
                      "test_accuracy": None if a.max_steps else round(100.0 * correct / len(vy), 2),
                      "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
