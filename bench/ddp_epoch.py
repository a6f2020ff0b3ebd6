#!/usr/bin/env python3
"""Seed 000's second experiment, cohort against PyTorch in the same run: model A, one epoch of
Fashion-MNIST, batch 128 per process, 1 intra-op thread per process (or replica):

    cohort  single            train_mnist --threads 1
    cohort  ddp 2 x 1         mpirun -np 2 train_mnist --parallel ddp --threads 1
    cohort  threads 2 x 1     train_mnist --parallel threads --replicas 2 --batch-size 256
    cohort  ... --deterministic variants of the last two (what bitwise reproducibility costs)
    torch   single            bench/torch_ddp_epoch.py --processes 1
    torch   gloo DDP 2 x 1    bench/torch_ddp_epoch.py --processes 2

Every configuration runs --reps times, alternating; the table shows medians of the epoch time
(training loop only), samples/s, test accuracy, the speed-up over the same framework's single
process and the scaling efficiency (speed-up / 2). JSON lines go to --json.

    python3 bench/ddp_epoch.py --reps 3 --json bench/ddp_epoch.jsonl --markdown
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import append_jsonl, print_table  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def cohort_configs(a):
    exe = a.train_mnist
    base = [exe, "--model", "A", "--epochs", "1", "--threads", "1", "--log-interval", "0", "--data-dir", a.data_dir]
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2"]
    return [
        ("cohort", "single", 1, base),
        ("cohort", "ddp 2x1", 2, mpirun + base + ["--parallel", "ddp"]),
        ("cohort", "threads 2x1", 2, base + ["--parallel", "threads", "--replicas", "2", "--batch-size", "256"]),
        ("cohort", "ddp 2x1 deterministic", 2, mpirun + base + ["--parallel", "ddp", "--deterministic"]),
        ("cohort", "threads 2x1 deterministic", 2,
         base + ["--parallel", "threads", "--replicas", "2", "--batch-size", "256", "--deterministic"]),
    ]


def torch_configs(a):
    script = [a.python, os.path.join(HERE, "torch_ddp_epoch.py"), "--data-dir", a.data_dir]
    return [("torch", "single", 1, script + ["--processes", "1"]),
            ("torch", "gloo DDP 2x1", 2, script + ["--processes", "2"])]


def run_cohort(cmd, tmp):
    metrics = os.path.join(tmp, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    out = subprocess.run(cmd + ["--metrics", metrics], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
    with open(metrics) as f:
        m = json.loads(f.readline())
    acc = float(re.search(r"Test accuracy: ([0-9.]+)%", out.stdout).group(1))
    return {"epoch_s": m["epoch time"], "samples_per_s": m["samples_per_s"], "test_accuracy": acc}


def run_torch(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{out.stdout}{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-mnist", default=os.path.join(ROOT, "build", "examples", "train_mnist"))
    ap.add_argument("--python", default=sys.executable, help="the Python with torch")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="append one JSON line per configuration (medians)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        raise SystemExit("ddp_epoch: mpirun not found (apt-get install openmpi-bin)")
    configs = cohort_configs(a) + ([] if a.no_torch else torch_configs(a))
    runs = {c[:3]: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for fw, name, procs, cmd in configs:
                r = run_cohort(cmd, tmp) if fw == "cohort" else run_torch(cmd)
                runs[(fw, name, procs)].append(r)
                print(f"[rep {rep + 1}/{a.reps}] {fw:6} {name:26} epoch {r['epoch_s']:7.2f} s  "
                      f"{r['samples_per_s']:8.0f} samples/s  test accuracy {r['test_accuracy']:.2f}%", flush=True)
    rows = []
    for (fw, name, procs), rs in runs.items():
        rows.append({"framework": fw, "parallel": name, "processes_or_replicas": procs,
                     "epoch_s": statistics.median(r["epoch_s"] for r in rs),
                     "samples_per_s": statistics.median(r["samples_per_s"] for r in rs),
                     "test_accuracy": statistics.median(r["test_accuracy"] for r in rs),
                     "runs": [r["epoch_s"] for r in rs]})
    single = {r["framework"]: r["samples_per_s"] for r in rows if r["parallel"] == "single"}
    for r in rows:
        r["speedup"] = r["samples_per_s"] / single[r["framework"]]
        r["scaling_efficiency"] = r["speedup"] / r["processes_or_replicas"]
    torch_rate = {r["parallel"]: r["samples_per_s"] for r in rows if r["framework"] == "torch"}
    for r in rows:
        peer = torch_rate.get("single" if r["parallel"] == "single" else "gloo DDP 2x1")
        r["vs_torch"] = r["samples_per_s"] / peer if peer and r["framework"] == "cohort" else None
    head = ["framework", "configuration", "epoch s", "samples/s", "test acc %", "speed-up", "efficiency",
            "cohort / torch"]
    lines = []
    for r in rows:
        lines.append([r["framework"], r["parallel"], f"{r['epoch_s']:.2f}", f"{r['samples_per_s']:.0f}",
                      f"{r['test_accuracy']:.2f}", f"{r['speedup']:.2f}", f"{r['scaling_efficiency']:.2f}",
                      f"{r['vs_torch']:.2f}" if r["vs_torch"] else ""])
    print_table(head, lines, a.markdown)
    print(f"medians of {a.reps} runs; cohort / torch compares the same configuration (single with single, "
          f"2 processes or replicas with gloo DDP 2x1)")
    append_jsonl(a.json, rows)


if __name__ == "__main__":
    main()
