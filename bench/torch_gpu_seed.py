#!/usr/bin/env python3
"""PyTorch twin of `train_on_device_cuda --windows`, for scripts/gpu-check.sh: the seed notebooks'
models A-D and ResNet-20 with the same recipes (A Adadelta lr 0.5 batch 128, NLL; B SGD lr 1e-4
batch 100; C, D, resnet Adam lr 1e-3 eps 1e-7 batch 128), timed on one GPU in PyTorch's best
configurations. Prints (and appends to --out) one JSON line per model and configuration, each
written as soon as it is measured, so a run cut short keeps what it finished.

    python3 bench/torch_gpu_seed.py --models resnet,A,B,C,D --configs nchw-fp32,nchw-tf32,cl-bf16
    python3 bench/torch_gpu_seed.py --models resnet --configs cl-bf16-compile --out torch.jsonl

A configuration is <layout>-<precision>[-compile]:
  layout     nchw (contiguous) or cl (torch.channels_last, model and inputs)
  precision  fp32 (TF32 off for matmuls and cuDNN: exact fp32), tf32 (TF32 on for both: PyTorch's
             default for convolutions), bf16 / fp16 (torch.autocast, TF32 on; fp16 with
             GradScaler, the amp equivalent of seed 004's Apex O2)
  compile    torch.compile(model, mode="reduce-overhead") (CUDA graphs), compiled during the warm-up
Timing: --warmup-steps untimed steps, then --windows windows of --window-steps steps, each between
two torch.cuda.Event records on an idle device (cohort's protocol); the median window gives ms per
step and samples/s. The batches are consecutive slices of a shuffled order of the training set,
already on the GPU (indexing only: PyTorch's most favourable input path; cohort copies each batch
from pinned host memory). Memory: torch.cuda.max_memory_allocated and the device's use from
torch.cuda.mem_get_info (what cohort reports).
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from cohort_modules import resnet20  # noqa: E402
from torch_throughput import model as seed_model  # noqa: E402

MODELS = ("resnet", "A", "B", "C", "D")


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


def recipe(name, net):
    """(optimizer, loss function, batch) of the model's seed notebook."""
    if name == "A":
        return torch.optim.Adadelta(net.parameters(), lr=0.5), F.nll_loss, 128
    if name == "B":
        return torch.optim.SGD(net.parameters(), lr=1e-4), F.cross_entropy, 100
    return torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-7), F.cross_entropy, 128


def parse_config(text):
    parts = text.split("-")
    if len(parts) not in (2, 3) or parts[0] not in ("nchw", "cl") or parts[1] not in ("fp32", "tf32", "bf16", "fp16") \
            or (len(parts) == 3 and parts[2] != "compile"):
        raise SystemExit(f"torch_gpu_seed: configuration {text!r} is not <nchw|cl>-<fp32|tf32|bf16|fp16>[-compile]")
    return {"layout": parts[0], "precision": parts[1], "compile": len(parts) == 3}


def measure(name, cfg, x_all, y_all, a):
    torch.manual_seed(0)
    tf32 = cfg["precision"] != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last if cfg["layout"] == "cl" else torch.contiguous_format
    net = (resnet20() if name == "resnet" else seed_model(name)).cuda().to(memory_format=fmt).train()
    opt, loss_fn, batch = recipe(name, net)
    run = torch.compile(net, mode="reduce-overhead") if cfg["compile"] else net
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg["precision"])
    scaler = torch.amp.GradScaler("cuda", enabled=cfg["precision"] == "fp16")
    order = torch.randperm(len(x_all), device="cuda")
    position = [0]

    def step():
        if position[0] + batch > len(order):
            position[0] = 0
        idx = order[position[0]:position[0] + batch]
        position[0] += batch
        x = x_all[idx].contiguous(memory_format=fmt)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(run(x), y_all[idx])
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    t0 = time.perf_counter()
    for _ in range(a.warmup_steps):
        step()
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t0
    torch.cuda.reset_peak_memory_stats()
    windows = []
    for _ in range(a.windows):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(a.window_steps):
            step()
        stop.record()
        torch.cuda.synchronize()
        windows.append(start.elapsed_time(stop))
    per_step = statistics.median(windows) / a.window_steps
    free, total = torch.cuda.mem_get_info()
    return {"framework": "pytorch", "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "model": name,
            "config": "-".join([cfg["layout"], cfg["precision"]] + (["compile"] if cfg["compile"] else [])),
            "precision": cfg["precision"], "allow_tf32": tf32, "channels_last": cfg["layout"] == "cl",
            "compile": cfg["compile"], "batch": batch, "warmup_steps": a.warmup_steps, "warmup_s": warmup_s,
            "window_steps": a.window_steps, "window_ms": windows, "ms_per_step": per_step,
            "samples_per_s": 1000.0 * batch / per_step, "max_memory_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
            "device_used_mib": (total - free) / 2**20, "timer": "cuda events"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet,A,B,C,D")
    ap.add_argument("--configs", default="nchw-fp32,nchw-tf32,cl-tf32,cl-bf16,cl-fp16")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--warmup-steps", type=int, default=20)
    ap.add_argument("--window-steps", type=int, default=50)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--out", help="append the JSON lines to this file too")
    a = ap.parse_args()
    models = a.models.split(",")
    for m in models:
        if m not in MODELS:
            raise SystemExit(f"torch_gpu_seed: unknown model {m!r} (one of {', '.join(MODELS)})")
    names = a.configs.split(",")
    configs = [parse_config(c) for c in names]
    if not torch.cuda.is_available():
        raise SystemExit("torch_gpu_seed: torch sees no CUDA device")
    tr = read_idx(find(a.data_dir, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    mean, std = float(tr.mean()), float(tr.std())
    x_all = torch.from_numpy((tr - mean) / std).unsqueeze(1).cuda()
    y_all = torch.from_numpy(read_idx(find(a.data_dir, "train-labels-idx1-ubyte")).astype(np.int64)).cuda()
    failed = 0
    for m in models:
        for text, cfg in zip(names, configs):
            try:
                record = measure(m, cfg, x_all, y_all, a)
            except Exception as e:  # one configuration failing (a compile error) must not hide the others
                failed += 1
                record = {"framework": "pytorch", "model": m, "config": text, "error": f"{type(e).__name__}: {e}"[:500]}
            line = json.dumps(record)
            print(line, flush=True)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(line + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
