#!/usr/bin/env python3
"""PyTorch twin of `train_mnist --model resnet|mobilenet`: the same ResNet-20 or MobileNetV2-small
(tests/reference/cohort_modules.py),
data (the IDX files, normalised with the training set's own mean and std), optimiser and batch
size, on real shuffled batches. Prints one JSON line per epoch (epoch, seconds, samples_per_s,
train_loss, test_accuracy) and a final line with the test accuracy.

    python3 bench/torch_train_mnist.py --epochs 2 --threads 2 --layout channels_last
    python3 bench/torch_train_mnist.py --max-steps 150 --warmup 10 --compile --no-eval  # a throughput window

--lr2/--lr2-from: the learning rate from that epoch on (a one-step schedule, which
train_mnist gets with --resume and a new --lr).

--recipe: issue 17's ResNet recipe, as bench/resnet_recipe.sh gives it to train_mnist: SGD with
Nesterov momentum, weight decay only on tensors of rank >= 2 that are not biases,
SequentialLR(LinearLR(0.1, 1 epoch), CosineAnnealingLR(epochs - 1)) stepped per epoch, label
smoothing 0.1, RandomCrop(28, padding=2) (a raw 0 pixel, normalised) + RandomHorizontalFlip,
clip_grad_norm_(5).
"""
import argparse
import gzip
import json
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from cohort_modules import mobilenet_v2_small, resnet20  # noqa: E402


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(data_dir, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(data_dir, name)):
            return os.path.join(data_dir, name)
    raise SystemExit(f"torch_train_mnist: no {stem}[.gz] in {data_dir}")


def load(data_dir):
    tr = read_idx(find(data_dir, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    te = read_idx(find(data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    mean, std = float(tr.mean()), float(tr.std())  # as cohort's Normalization::of
    norm = lambda a: torch.from_numpy((a - mean) / std).unsqueeze(1)  # noqa: E731
    ytr = torch.from_numpy(read_idx(find(data_dir, "train-labels-idx1-ubyte")).astype(np.int64))
    yte = torch.from_numpy(read_idx(find(data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64))
    return norm(tr), ytr, norm(te), yte, (0.0 - mean) / std


def crop_and_flip(x, pad_value, padding, g):
    """RandomCrop(H, padding) + RandomHorizontalFlip() per sample on a normalised (N, 1, H, W) batch."""
    n, _, h, w = x.shape
    padded = F.pad(x, (padding,) * 4, value=pad_value)
    dy = torch.randint(0, 2 * padding + 1, (n,), generator=g)
    dx = torch.randint(0, 2 * padding + 1, (n,), generator=g)
    flip = torch.rand(n, generator=g) < 0.5
    out = torch.empty_like(x)
    for i in range(n):
        img = padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w]
        out[i] = img.flip(-1) if flip[i] else img
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--lr2", type=float, default=None)
    ap.add_argument("--lr2-from", type=int, default=0, help="first epoch (1-based) trained at --lr2")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layout", default="contiguous", choices=["contiguous", "channels_last"])
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (inductor)")
    ap.add_argument("--model", default="resnet", choices=["resnet", "mobilenet"],
                    help="resnet: ResNet-20; mobilenet: MobileNetV2-small (cohort_modules.mobilenet_v2_small)")
    ap.add_argument("--bf16", action="store_true", help="torch.autocast(cpu, bfloat16) around forward and loss")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=0,
                    help="steps of the first epoch left out of samples_per_s (torch.compile's compilation)")
    ap.add_argument("--no-eval", action="store_true", help="skip the test set (throughput windows)")
    ap.add_argument("--recipe", action="store_true", help="issue 17's ResNet recipe (see the file comment)")
    ap.add_argument("--freeze-below", type=int, default=0,
                    help="fine-tune: modules 0..N-1 frozen (requires_grad_(False) and eval()), as cohort's "
                         "--freeze below:N")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr, xte, yte, pad_value = load(a.data_dir)
    fmt = torch.channels_last if a.layout == "channels_last" else torch.contiguous_format
    net = (mobilenet_v2_small() if a.model == "mobilenet" else resnet20()).to(memory_format=fmt)
    frozen = list(net.children())[:a.freeze_below]
    for module in frozen:
        module.requires_grad_(False)

    def train_mode():  # the frozen part stays in eval mode (BatchNorm keeps its statistics)
        net.train()
        for module in frozen:
            module.eval()

    train_mode()
    scheduler, smoothing, clip = None, 0.0, None
    if a.recipe:
        decay, no_decay = [], []
        for name, p in net.named_parameters():
            (no_decay if p.ndim <= 1 or name.endswith(".bias") else decay).append(p)
        opt = torch.optim.SGD([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=a.lr,
                              momentum=a.momentum, nesterov=True, weight_decay=5e-4)
        S = torch.optim.lr_scheduler
        scheduler = S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.1, total_iters=1),
                                         S.CosineAnnealingLR(opt, T_max=a.epochs - 1)], milestones=[1])
        smoothing, clip = 0.1, 5.0
    elif a.optimizer == "sgd":
        opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=a.lr, momentum=a.momentum,
                              weight_decay=a.weight_decay)
    else:
        opt = torch.optim.Adam(net.parameters(), lr=a.lr, eps=1e-7, weight_decay=a.weight_decay)
    model = torch.compile(net) if a.compile else net

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = F.cross_entropy(model(x), y, label_smoothing=smoothing)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
        opt.step()
        return loss.detach()

    def evaluate():
        net.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            for i in range(0, len(xte), 1000):
                x = xte[i:i + 1000].contiguous(memory_format=fmt)
                correct += int((model(x).argmax(1) == yte[i:i + 1000]).sum())
        train_mode()
        return 100.0 * correct / len(xte)

    g = torch.Generator().manual_seed(a.seed)
    steps, config = 0, {"model": a.model, "bf16": a.bf16, "layout": a.layout, "compile": a.compile, "threads": a.threads,
                        "freeze_below": a.freeze_below}
    for epoch in range(1, a.epochs + 1):
        if a.lr2 is not None and a.lr2_from and epoch >= a.lr2_from:
            for group in opt.param_groups:
                group["lr"] = a.lr2
        order = torch.randperm(len(xtr), generator=g)
        t0, samples, loss_sum, n = time.perf_counter(), 0, 0.0, 0
        for b in range(0, len(order), a.batch_size):
            idx = order[b:b + a.batch_size]
            x = crop_and_flip(xtr[idx], pad_value, 2, g) if a.recipe else xtr[idx]
            loss_sum += float(train_step(x.contiguous(memory_format=fmt), ytr[idx]))
            samples += len(idx)
            n += 1
            steps += 1
            if steps == a.warmup:  # restart the clock: the window counts the steps after it
                t0, samples = time.perf_counter(), 0
            if a.max_steps and steps >= a.max_steps:
                break
        seconds = time.perf_counter() - t0
        acc = None if a.no_eval else evaluate()
        print(json.dumps({"framework": "pytorch", "torch": torch.__version__, **config, "epoch": epoch,
                          "seconds": seconds, "steps": n, "samples_per_s": samples / seconds,
                          "train_loss": loss_sum / max(n, 1), "test_accuracy": acc,
                          "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)
        if scheduler:
            scheduler.step()
        if a.max_steps and steps >= a.max_steps:
            break
    if not a.no_eval:
        print(f"Test accuracy: {evaluate():.2f}%")


if __name__ == "__main__":
    main()
