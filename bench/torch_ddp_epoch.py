#!/usr/bin/env python3
"""Seed 000's experiment in PyTorch: model A (ConvNet), Adadelta(0.5), batch 128 per process, one
epoch of Fashion-MNIST on 1 process or on N processes with DistributedDataParallel over gloo
(torch.multiprocessing.spawn, DistributedSampler), each process holding 1 intra-op thread.
Prints one JSON line: epoch time (the training loop only, as cohort's train_mnist reports it),
samples/s and test accuracy (rank 0, after the epoch).

    python3 bench/torch_ddp_epoch.py --processes 2
    python3 bench/torch_ddp_epoch.py --processes 1 --data-dir /usr/share/datasets/fashion-mnist

Reads the IDX files itself (no torchvision); images are normalised with the training set's mean
and standard deviation, as train_mnist does.
"""
import argparse
import gzip
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_throughput import model  # noqa: E402  (the same model A as the throughput bench)


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    raise SystemExit(f"torch_ddp_epoch: {stem}[.gz] not found in {data_dir}")


def load(data_dir):
    tx = read_idx(find(data_dir, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    ty = read_idx(find(data_dir, "train-labels-idx1-ubyte")).astype(np.int64)
    vx = read_idx(find(data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    vy = read_idx(find(data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64)
    mean, std = float(tx.mean()), float(tx.std())
    norm = lambda a: torch.from_numpy((a - mean) / std).unsqueeze(1)  # noqa: E731
    return norm(tx), torch.from_numpy(ty), norm(vx), torch.from_numpy(vy)


def worker(rank, args, port, queue):
    torch.set_num_threads(args.threads)
    if args.processes > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group(backend="gloo", init_method="env://", world_size=args.processes, rank=rank)
    torch.manual_seed(0)
    tx, ty, vx, vy = load(args.data_dir)
    train_set = torch.utils.data.TensorDataset(tx, ty)
    sampler = (torch.utils.data.distributed.DistributedSampler(train_set, num_replicas=args.processes, rank=rank)
               if args.processes > 1 else None)
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=sampler is None,
                                         sampler=sampler, num_workers=0)
    net = model("A")
    optimizer = torch.optim.Adadelta(net.parameters(), lr=0.5)
    if args.processes > 1:
        net = torch.nn.parallel.DistributedDataParallel(net)
    net.train()
    start = time.perf_counter()
    for x, y in loader:
        loss = F.nll_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    if rank == 0:
        net.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(vy), 1000):
                correct += int((net(vx[i:i + 1000]).argmax(1) == vy[i:i + 1000]).sum())
        queue.put({"seconds": seconds, "test_accuracy": 100.0 * correct / len(vy), "samples": len(ty)})
    if args.processes > 1:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    ap.add_argument("--batch-size", type=int, default=128, help="per process, as seed 000")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    if args.processes > 1:
        mp.spawn(worker, args=(args, port, queue), nprocs=args.processes, join=True)
    else:
        worker(0, args, port, queue)
    r = queue.get()
    print(json.dumps({"framework": "torch", "parallel": "gloo DDP" if args.processes > 1 else "single",
                      "processes": args.processes, "threads": args.threads, "batch_size": args.batch_size,
                      "epoch_s": round(r["seconds"], 3), "samples_per_s": round(r["samples"] / r["seconds"], 1),
                      "test_accuracy": round(r["test_accuracy"], 2), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
