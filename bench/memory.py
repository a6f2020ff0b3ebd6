#!/usr/bin/env python3
"""Peak memory of training + evaluation, cohort against PyTorch (issue 35): the 3x32x32 ResNet-20,
--steps steps at batch --batch, then the 10,000 test images at --eval-batch. cohort_memory
(bench/memory.cpp) and bench/torch_memory.py (eager contiguous and channels_last) alternate,
--reps processes each; the table gives each configuration's median peaks.

    python3 bench/memory.py --cohort build/bench/cohort_memory --steps 100 --reps 3 --json bench/memory.jsonl

"data" is the peak right after loading the data (the process, the framework's libraries and the
images), "train" after training, "peak" after evaluation: the whole run's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"memory: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cohort", default=os.path.join(HERE, "..", "build", "bench", "cohort_memory"))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--eval-batch", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="append the results to this JSON-lines file")
    a = ap.parse_args()
    common = ["--steps", str(a.steps), "--batch", str(a.batch), "--eval-batch", str(a.eval_batch), "--threads",
              str(a.threads)]
    configs = {"cohort": [a.cohort] + common,
               "PyTorch eager": [sys.executable, os.path.join(HERE, "torch_memory.py")] + common,
               "PyTorch channels_last": [sys.executable, os.path.join(HERE, "torch_memory.py")] + common +
                                        ["--layout", "channels_last"]}
    runs = {k: [] for k in configs}
    for rep in range(a.reps):
        for k, cmd in configs.items():
            r = run(cmd)
            runs[k].append(r)
            print(f"rep {rep + 1}: {k}: peak {r['peak_mib']:.0f} MiB (data {r['data_mib']:.0f}, after training "
                  f"{r['peak_after_train_mib']:.0f})", file=sys.stderr, flush=True)
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("data_mib", "peak_after_train_mib", "peak_mib")}
           for k, v in runs.items()}
    best = min((k for k in med if k != "cohort"), key=lambda k: med[k]["peak_mib"])
    print(f"\n3x32x32 ResNet-20: {a.steps} training steps at batch {a.batch}, then 10,000 test images at batch "
          f"{a.eval_batch}; {a.threads} threads; medians of {a.reps} alternating processes (MiB)\n")
    print("| configuration | data loaded | after training | whole run (peak) | cohort / this (peak) |")
    print("|---|---|---|---|---|")
    for k, m in med.items():
        print(f"| {k} | {m['data_mib']:.0f} | {m['peak_after_train_mib']:.0f} | {m['peak_mib']:.0f} | "
              f"{med['cohort']['peak_mib'] / m['peak_mib']:.2f} |")
    print(f"\ncohort / PyTorch's leanest ({best}): {med['cohort']['peak_mib'] / med[best]['peak_mib']:.2f}")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps({"bench": "memory", "steps": a.steps, "batch": a.batch, "eval_batch": a.eval_batch,
                                "threads": a.threads, "reps": a.reps, "runs": runs, "medians": med}) + "\n")


if __name__ == "__main__":
    main()
