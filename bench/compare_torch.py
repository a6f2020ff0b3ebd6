#!/usr/bin/env python3
"""Runs cohort and PyTorch on the same configurations in the same session, alternating, and
prints the ratio table (medians over repetitions). Nothing else should run meanwhile.

    python3 bench/compare_torch.py --cohort build/bench/cohort_throughput \
        --models A B C D --batches 128 --modes train infer --reps 3 --json bench/results.jsonl
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cohort", required=True, help="path to cohort_throughput")
    ap.add_argument("--python", default=sys.executable, help="Python with torch")
    ap.add_argument("--models", nargs="+", default=["A", "B", "C", "D"])
    ap.add_argument("--batches", nargs="+", type=int, default=[128])
    ap.add_argument("--modes", nargs="+", default=["train", "infer"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="append one JSON line per configuration here")
    a = ap.parse_args()
    rows = []
    for model in a.models:
        for mode in a.modes:
            for batch in a.batches:
                for threads in a.threads:
                    iters = {"A": 20, "B": 20, "C": 30, "D": 3}[model] * (3 if mode == "infer" else 1)
                    args = ["--model", model, "--mode", mode, "--batch", str(batch), "--threads", str(threads),
                            "--iters", str(iters)]
                    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
                    c, t = [], []
                    for _ in range(a.reps):  # alternate so drift hits both equally
                        c.append(run([a.cohort] + args, env))
                        t.append(run([a.python, os.path.join(HERE, "torch_throughput.py")] + args, env))
                    cm = statistics.median(r["samples_per_s"] for r in c)
                    tm = statistics.median(r["samples_per_s"] for r in t)
                    row = {"model": model, "mode": mode, "batch": batch, "threads": threads,
                           "cohort_samples_per_s": cm, "torch_samples_per_s": tm, "ratio": round(cm / tm, 3),
                           "cohort_peak_rss_mib": max(r["peak_rss_mib"] for r in c),
                           "torch_peak_rss_mib": max(r["peak_rss_mib"] for r in t), "reps": a.reps,
                           "torch_version": t[0]["torch"]}
                    rows.append(row)
                    print(f"{model} {mode:5} b={batch:<4} t={threads}  cohort {cm:9.1f}/s  torch {tm:9.1f}/s  "
                          f"ratio {cm / tm:5.2f}  rss {row['cohort_peak_rss_mib']:.0f} vs {row['torch_peak_rss_mib']:.0f} MiB",
                          flush=True)
                    if a.json:
                        with open(a.json, "a") as f:
                            f.write(json.dumps(row) + "\n")
    print("\n| model | mode | batch | threads | cohort samples/s | PyTorch samples/s | ratio | peak RSS cohort / torch (MiB) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['mode']} | {r['batch']} | {r['threads']} | {r['cohort_samples_per_s']:.0f} | "
              f"{r['torch_samples_per_s']:.0f} | {r['ratio']:.2f} | {r['cohort_peak_rss_mib']:.0f} / {r['torch_peak_rss_mib']:.0f} |")


if __name__ == "__main__":
    main()
