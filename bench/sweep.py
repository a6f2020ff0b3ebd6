#!/usr/bin/env python3
"""Seed 003's sweep on the CPU with cohort's train_mnist: dataset repeated 1x/4x/8x, batch
128/256/512, small (model C) and large (model D) models, 2 epochs each; records the first and
second epoch times and the test accuracy as JSON lines (one per configuration), then
bench/plot_sweep.py draws them.

    python3 bench/sweep.py --threads 2                          # the whole sweep (hours: model D)
    python3 bench/sweep.py --models C --threads 1 2             # the small model only (minutes)
    python3 bench/sweep.py --models D --repeats 1 --batches 128 # extend later: finished ones are skipped
    python3 bench/sweep.py --dry-run                            # what is left, and how long it should take

Resumable: a configuration (model, dataset repeat, batch, threads, epochs) already in --out is
skipped, so an interrupted sweep continues where it stopped and a later call can add models,
batch sizes or thread counts. Each line carries seed 003's fields (n_dataset_repeat, batch_size,
n_devices, model_size, "first epoch time", "second epoch time") plus test_accuracy,
samples_per_s (second epoch), threads and the model letter. train_mnist's own output goes to
OUT.log. Run it on an otherwise idle machine.

--max-steps N (for smoke tests) stops each run early; such lines are marked "partial" and are
neither skipped on resume nor plotted.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZES = {"C": "small", "D": "large"}
TRAIN_SAMPLES = 60000  # Fashion-MNIST / MNIST training set
# Guessed training samples/s at 1 thread (train_mnist, reference machine), for the first estimate;
# replaced by the rates already measured in --out as soon as there are any.
GUESS_RATE = {"C": 17000.0, "D": 240.0}
THREAD_SPEEDUP = 1.7
STARTUP_S = 3.0  # loading and normalising the data, evaluating the test set twice


def key(r):
    return (r.get("model") or {"small": "C", "large": "D"}[r["model_size"]], int(r["n_dataset_repeat"]),
            int(r["batch_size"]), int(r.get("threads", 1)), int(r.get("epochs", 2)))


def load(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    rows.append(json.loads(line))
    return rows


def rate(model, threads, done):
    """Training samples/s: the median measured in earlier runs of (model, threads), else a guess."""
    seen = [r["samples_per_s"] for r in done if key(r)[0] == model and key(r)[3] == threads and r.get("samples_per_s")]
    if seen:
        return statistics.median(seen)
    return GUESS_RATE[model] * (THREAD_SPEEDUP if threads > 1 else 1.0)


def estimate(cfg, epochs, done):
    model, repeat, _, threads, _ = cfg
    return STARTUP_S + epochs * TRAIN_SAMPLES * repeat / rate(model, threads, done)


def fmt_duration(s):
    s = int(round(s))
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run_one(a, cfg, log):
    """Trains one configuration; returns its JSON line (a dict)."""
    model, repeat, batch, threads, epochs = cfg
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [a.train_mnist, "--model", model, "--repeat", str(repeat), "--batch-size", str(batch), "--epochs",
               str(epochs), "--threads", str(threads), "--data-dir", a.data_dir, "--seed", str(a.seed),
               "--metrics", metrics, "--log-interval", str(a.log_interval)]
        if a.max_steps:
            cmd += ["--max-steps", str(a.max_steps)]
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
            for line in p.stdout:
                log.write(line)
                if a.verbose:
                    print("    " + line, end="", flush=True)
            log.flush()
        if p.returncode != 0:
            raise RuntimeError(f"train_mnist exited with {p.returncode} (see {a.out}.log)")
        epochs_seen = load(metrics)
    if not epochs_seen:
        raise RuntimeError("train_mnist wrote no metrics")
    last = epochs_seen[-1]
    partial = bool(a.max_steps) or not all(e.get("complete", True) for e in epochs_seen) or len(epochs_seen) < epochs
    times = [e.get("epoch time") for e in epochs_seen]
    row = {
        "n_dataset_repeat": repeat, "batch_size": batch, "n_devices": last.get("n_devices", 1),
        "model_size": SIZES[model], "model": model,
        # Complete runs: the trainer's own first/second epoch times; partial ones: each epoch's time so far.
        "first epoch time": last.get("first epoch time") if not partial else (times[0] if times else None),
        "second epoch time": last.get("second epoch time") if not partial else (times[1] if len(times) > 1 else None),
        "test_accuracy": last.get("test_accuracy"),
        "test_accuracy_per_epoch": [e.get("test_accuracy") for e in epochs_seen],
        "samples_per_s": last.get("samples_per_s"),
        "samples_per_s_per_epoch": [e.get("samples_per_s") for e in epochs_seen],
        "train_loss_per_epoch": [e.get("train_loss") for e in epochs_seen],
        "threads": threads, "epochs": epochs, "seed": a.seed, "framework": "cohort",
        "dataset": os.path.basename(os.path.normpath(a.data_dir)), "machine": platform.node(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if partial:
        row["partial"] = True
        row["max_steps"] = a.max_steps
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-mnist", default=os.path.join(ROOT, "build", "examples", "train_mnist"),
                    help="path to train_mnist (default: build/examples/train_mnist)")
    ap.add_argument("--models", nargs="+", default=["C", "D"], choices=["C", "D"], help="C: small, D: large")
    ap.add_argument("--repeats", nargs="+", type=int, default=[1, 4, 8], help="dataset repeats per epoch")
    ap.add_argument("--batches", nargs="+", type=int, default=[128, 256, 512])
    ap.add_argument("--threads", nargs="+", type=int, default=[2])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist",
                    help="MNIST-format directory (seed 003 used MNIST digits; any MNIST-format set works)")
    ap.add_argument("--out", default=os.path.join(HERE, "sweep_cpu.jsonl"), help="JSON lines, appended")
    ap.add_argument("--log-interval", type=int, default=200, help="train_mnist progress line every N steps")
    ap.add_argument("--verbose", action="store_true", help="show train_mnist's output (it always goes to OUT.log)")
    ap.add_argument("--max-steps", type=int, default=0, help=argparse.SUPPRESS)  # smoke tests: partial runs
    ap.add_argument("--dry-run", action="store_true", help="list what is left and the estimated time, run nothing")
    a = ap.parse_args()

    done = [r for r in load(a.out) if not r.get("partial")]
    finished = {key(r) for r in done}
    grid = [(m, d, b, t, a.epochs) for m in a.models for d in a.repeats for b in a.batches for t in a.threads]
    todo = [c for c in grid if a.max_steps or c not in finished]
    left = sum(estimate(c, a.epochs, done) for c in todo)
    print(f"{len(grid)} configurations, {len(grid) - len(todo)} already in {a.out}, {len(todo)} to run; "
          f"estimated {fmt_duration(left)}", flush=True)
    if a.dry_run:
        for c in todo:
            print(f"  model {c[0]} ({SIZES[c[0]]}) repeat {c[1]} batch {c[2]} threads {c[3]}: "
                  f"~{fmt_duration(estimate(c, a.epochs, done))}")
        return
    if todo and not os.path.exists(a.train_mnist):
        sys.exit(f"sweep: {a.train_mnist} not found; build it: cmake --build build --target train_mnist")
    with open(a.out + ".log", "a") as log:
        for i, c in enumerate(todo):
            model, repeat, batch, threads, _ = c
            print(f"[{i + 1}/{len(todo)}] model {model} ({SIZES[model]}), dataset {repeat}x, batch {batch}, "
                  f"{threads} thread(s): ~{fmt_duration(estimate(c, a.epochs, done))}", flush=True)
            try:
                row = run_one(a, c, log)
            except RuntimeError as e:
                print(f"    FAILED: {e}", file=sys.stderr, flush=True)
                continue
            with open(a.out, "a") as f:
                f.write(json.dumps(row) + "\n")
            if not row.get("partial"):
                done.append(row)
            left = sum(estimate(x, a.epochs, done) for x in todo[i + 1:])
            fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
            print(f"    epoch times {fmt(row['first epoch time'], '.2f')} s, {fmt(row['second epoch time'], '.2f')} s; "
                  f"{fmt(row['samples_per_s'], '.0f')} samples/s; test accuracy {fmt(row['test_accuracy'], '.2f')}%"
                  f"{' (partial)' if row.get('partial') else ''}; ~{fmt_duration(left)} left", flush=True)


if __name__ == "__main__":
    main()
