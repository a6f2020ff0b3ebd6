#!/usr/bin/env python3
"""Depthwise convolution (issue 37): cohort's kernels (bench/depthwise_conv.cpp) against the memory
bandwidth limit and against PyTorch's nn.Conv2d(C, C, K, groups=C) on the same shapes, forward
and backward, in alternating processes; medians over --rounds.

    .venv/bin/python bench/depthwise_conv.py --binary <release tree>/bench/depthwise_conv [--rounds 3]

PyTorch runs in eager mode with contiguous (NCHW) and channels_last tensors, each in its own
process, set_num_threads(--threads); the faster per shape is "best". Backward = the input
gradient and the weight and bias gradients (torch: y.backward(dy) with requires_grad on x).
Writes JSON lines to --json and prints a Markdown table.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

# (name, C, H, K, S, batch divisor): bench/depthwise_conv.cpp's shapes, in its order.
SHAPES = [("mnv2 96@112 s2", 96, 112, 3, 2, 4), ("mnv2 144@56", 144, 56, 3, 1, 4), ("mnv2 192@28", 192, 28, 3, 1, 4),
          ("small 96@14", 96, 14, 3, 1, 1), ("small 192@7", 192, 7, 3, 1, 1), ("small 96@14 k5", 96, 14, 5, 1, 1),
          ("small 96@28 s2", 96, 28, 3, 2, 1), ("small 144@14 s2", 144, 14, 3, 2, 1),
          ("small 192@7 s2", 192, 7, 3, 2, 1)]


def torch_child(args):
    import torch
    torch.set_num_threads(args.threads)
    for name, c, h, k, s, div in SHAPES:
        n = args.batch // div
        conv = torch.nn.Conv2d(c, c, k, s, k // 2, groups=c)
        x = torch.rand(n, c, h, h) * 1.6 - 0.8
        if args.config == "channels_last":
            conv = conv.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        x.requires_grad_(True)
        with torch.no_grad():
            dy = torch.full_like(conv(x), 0.25)

        def timed(f):
            f()
            t = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                f()
                t.append(time.perf_counter() - t0)
            return statistics.median(t)

        fwd = timed(lambda: conv(x))

        def backward():
            x.grad = None
            conv.zero_grad(set_to_none=True)
            y = conv(x)
            y.backward(dy)

        both = timed(backward)
        print(json.dumps({"bench": "depthwise_conv", "side": "torch", "config": args.config, "shape": name,
                          "batch": n, "threads": args.threads, "forward_ms": fwd * 1e3,
                          "backward_ms": max(both - fwd, 0) * 1e3}), flush=True)
    print(json.dumps({"bench": "depthwise_conv", "side": "torch", "config": args.config,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), flush=True)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("child", nargs="?", choices=["torch"])
    ap.add_argument("--binary", default="build-bench/bench/depthwise_conv")
    ap.add_argument("--config", default="eager", choices=["eager", "channels_last"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.child == "torch":
        return torch_child(args)
    rows = []
    common = ["--threads", str(args.threads), "--batch", str(args.batch), "--reps", str(args.reps)]
    for _ in range(args.rounds):  # alternating processes
        rows += run([args.binary] + common)
        for config in ["eager", "channels_last"]:
            rows += run([sys.executable, os.path.abspath(__file__), "torch", "--config", config] + common)
    machine = {"cpu": platform.processor() or platform.machine(), "threads": args.threads}
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps({**r, "machine": machine, "date": time.strftime("%Y-%m-%d")}) + "\n")

    def med(side, shape, key, config=None):
        v = [r[key] for r in rows if r["side"] == side and r.get("shape") == shape and (config is None or
                                                                                         r.get("config") == config)]
        return statistics.median(v)

    print("| shape | cohort fwd ms | bwd ms | share of triad fwd / bwd | torch best fwd ms | bwd ms | fwd x | bwd x |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, *_ in SHAPES:
        cf, cb = med("cohort", name, "forward_ms"), med("cohort", name, "backward_ms")
        tf = min(med("torch", name, "forward_ms", c) for c in ["eager", "channels_last"])
        tb = min(med("torch", name, "backward_ms", c) for c in ["eager", "channels_last"])
        sf, sb = med("cohort", name, "forward_share"), med("cohort", name, "backward_share")
        print(f"| {name} | {cf:.2f} | {cb:.2f} | {sf:.0%} / {sb:.0%} | {tf:.2f} | {tb:.2f} | {tf / cf:.2f} | {tb / cb:.2f} |")
    stream = statistics.median(r["stream_gbs"] for r in rows if r["side"] == "cohort" and "stream_gbs" in r)
    peaks = {k: max(r["peak_rss_mib"] for r in rows if "peak_rss_mib" in r and (r["side"] + r.get("config", "")) == k)
             for k in {r["side"] + r.get("config", "") for r in rows if "peak_rss_mib" in r}}
    print(f"\ntriad bandwidth {stream:.1f} GB/s; peak RSS (MiB): {peaks}")


if __name__ == "__main__":
    main()
