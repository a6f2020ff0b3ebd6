#!/usr/bin/env python3
"""PyTorch on examples/segment_fashion_mnist.cpp's recipe (issue 38), for its accuracy and speed.

    .venv/bin/python bench/segment_reference.py [--epochs N] [--train-samples N] [--threads T]
        [--config eager|channels_last|compile] [--seed S] [--json]

The task: pixel (h, w) of image n is class label[n] + 1 where its byte is >= 64, else 0 (11
classes). The network: tests/reference/cohort_modules.py's unet(1, 11, 16, 2), the twin of
cohort::models::UNet<Shape<1, 28, 28>, 11, 16, 2> (same layers, same state_dict names); PyTorch's
default initialisation (cohort's is the same distribution, not the same numbers). Adam (lr 1e-3),
batch 64, a seeded random order each epoch, full batches only; nn.CrossEntropyLoss on
(N, 11, 28, 28) scores; test pixel accuracy and mean IoU (classes present in labels or
predictions) on the 10,000 test images. Prints one line per epoch as the C++ example does.
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from cohort_modules import unet  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(split, what):
    stem = f"{split}-{what}-idx{3 if what == 'images' else 1}-ubyte"
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(DATA, name)):
            return os.path.join(DATA, name)
    raise FileNotFoundError(os.path.join(DATA, stem))


def load(split, limit):
    x = read_idx(find(split, "images"))[:limit]
    y = read_idx(find(split, "labels"))[:limit].astype(np.int64)
    masks = np.where(x >= 64, y[:, None, None] + 1, 0).astype(np.int64)
    images = ((x.astype(np.float32) / 255.0 - 0.2860) / 0.3530)[:, None]
    return torch.from_numpy(images), torch.from_numpy(masks)


def metrics(pred, truth, classes=11):
    confusion = torch.bincount(truth.flatten() * classes + pred.flatten(), minlength=classes * classes)
    confusion = confusion.reshape(classes, classes).double()
    tp = confusion.diag()
    union = confusion.sum(0) + confusion.sum(1) - tp
    iou = tp[union > 0] / union[union > 0]
    return float(tp.sum() / confusion.sum()), float(iou.mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-samples", type=int, default=60000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--config", choices=["eager", "channels_last", "compile"], default="eager")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--json", action="store_true", help="one JSON line per epoch instead of text")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_train, y_train = load("train", args.train_samples)
    x_test, y_test = load("t10k", 10000)
    model = unet(1, 11, 16, 2)
    fmt = torch.channels_last if args.config in ("channels_last", "compile") else torch.contiguous_format
    model = model.to(memory_format=fmt)
    step_model = torch.compile(model) if args.config == "compile" else model
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(args.seed)
    b = args.batch
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(len(x_train), generator=g)
        total, steps = 0.0, 0
        for i in range(0, len(order) - b + 1, b):
            idx = order[i:i + b]
            xb = x_train[idx].contiguous(memory_format=fmt)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(step_model(xb), y_train[idx])
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        train_s = time.perf_counter() - t0
        model.eval()
        preds = []
        with torch.no_grad():
            for i in range(0, len(x_test), b):
                preds.append(step_model(x_test[i:i + b].contiguous(memory_format=fmt)).argmax(1))
        acc, miou = metrics(torch.cat(preds), y_test)
        if args.json:
            print(json.dumps({"framework": "pytorch", "config": args.config, "epoch": epoch, "train_s": train_s,
                              "samples_per_s": steps * b / train_s, "loss": total / steps,
                              "pixel_accuracy": acc, "mean_iou": miou}), flush=True)
        else:
            print(f"epoch {epoch}: train loss {total / steps:.4f}, {train_s:.1f} s ({steps * b / train_s:.0f} "
                  f"samples/s); test pixel accuracy {acc:.4f}, mean IoU {miou:.4f}", flush=True)


if __name__ == "__main__":
    main()
