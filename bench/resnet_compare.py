#!/usr/bin/env python3
"""ResNet-20 (or, --model mobilenet, MobileNetV2-small) on Fashion-MNIST, cohort (`train_mnist
--model resnet|mobilenet`) against PyTorch (bench/torch_train_mnist.py: eager, channels_last,
torch.compile), on real shuffled batches; --precision bf16: cohort's MixedPrecision<bf16> against
torch.autocast(bfloat16).

Throughput (default): each configuration trains --steps steps in its own process, the four
alternating, --reps times; the table gives the median samples/s and cohort's ratio to PyTorch's
best configuration. PyTorch's windows leave out their first --warmup steps (compilation);
cohort's include its first step.

    python3 bench/resnet_compare.py --steps 150 --reps 3 --json bench/resnet.jsonl
    python3 bench/resnet_compare.py --steps 150 --reps 3 --freeze-below 21   # head-only fine-tune steps
    python3 bench/resnet_compare.py --model mobilenet --precision bf16 --steps 100 --reps 3

Each row also gives the peak resident memory of its processes (wait4's rusage, the child alone).

Accuracy (--accuracy): the same recipe trained to the end by both, one after the other:
SGD(momentum 0.9, weight decay 5e-4), batch 128, --lr for the first --epochs1 epochs, then --lr2
up to --epochs (cohort: `--save`, then `--resume` with the new `--lr`; PyTorch: its --lr2-from).

    python3 bench/resnet_compare.py --accuracy --epochs 12 --epochs1 9 --torch-config channels_last
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_CONFIGS = {"eager": [], "channels_last": ["--layout", "channels_last"], "compile": ["--compile"]}


def cohort_cmd(a, extra):
    freeze = ["--freeze", f"below:{a.freeze_below}"] if a.freeze_below else []
    return [a.train_mnist, "--model", a.model, "--precision", a.precision, "--optimizer", "sgd", "--momentum", "0.9", "--weight-decay",
            str(a.weight_decay), "--batch-size", str(a.batch), "--threads", str(a.threads), "--data-dir",
            a.data_dir] + freeze + extra


def torch_cmd(a, config, extra):
    return [sys.executable, os.path.join(HERE, "torch_train_mnist.py"), "--optimizer", "sgd", "--momentum", "0.9",
            "--weight-decay", str(a.weight_decay), "--batch-size", str(a.batch), "--threads", str(a.threads),
            "--data-dir", a.data_dir, "--freeze-below", str(a.freeze_below), "--model", a.model] + \
        (["--bf16"] if a.precision == "bf16" else []) + TORCH_CONFIGS[config] + extra


PEAK_MB = {}  # the last run's peak resident memory, per command kind


def run(cmd):
    """stdout of `cmd`; its own peak RSS (wait4's rusage: this child only) goes to PEAK_MB["last"]."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read()
        if p.returncode != 0:
            raise SystemExit(f"resnet_compare: {' '.join(cmd)} failed ({p.returncode}):\n{stdout}\n{err.read()}")
    PEAK_MB["last"] = usage.ru_maxrss / 1024
    return stdout


def cohort_rate(a):
    with tempfile.TemporaryDirectory() as d:
        metrics = os.path.join(d, "m.jsonl")
        run(cohort_cmd(a, ["--lr", str(a.lr), "--epochs", "1", "--max-steps", str(a.steps), "--metrics", metrics]))
        with open(metrics) as f:
            return json.loads(f.readline())["samples_per_s"]


def torch_rate(a, config):
    out = run(torch_cmd(a, config, ["--lr", str(a.lr), "--max-steps", str(a.steps + a.warmup), "--warmup",
                                    str(a.warmup), "--no-eval"]))
    return json.loads(out.splitlines()[0])["samples_per_s"]


def throughput(a):
    rates = {"cohort": []} | {c: [] for c in a.torch_configs}
    peaks = {k: [] for k in rates}
    for rep in range(a.reps):
        for name in rates:
            r = cohort_rate(a) if name == "cohort" else torch_rate(a, name)
            rates[name].append(r)
            peaks[name].append(PEAK_MB["last"])
            print(f"rep {rep + 1}: {name} {r:.0f} samples/s, peak {PEAK_MB['last']:.0f} MB", file=sys.stderr,
                  flush=True)
    med = {k: statistics.median(v) for k, v in rates.items()}
    peak = {k: max(v) for k, v in peaks.items()}
    best = max((k for k in med if k != "cohort"), key=lambda k: med[k])
    frozen = f", layers 0-{a.freeze_below - 1} frozen (head-only fine-tune)" if a.freeze_below else ""
    print(f"\n{'ResNet-20' if a.model == 'resnet' else 'MobileNetV2-small'} ({a.precision}), train{frozen}, batch {a.batch}, {a.threads} threads, {a.steps} steps per process, "
          f"medians of {a.reps} alternating processes\n")
    print("| configuration | samples/s (median) | runs | cohort / this | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    for k, v in med.items():
        runs = ", ".join(f"{x:.0f}" for x in rates[k])
        print(f"| {'cohort' if k == 'cohort' else 'PyTorch ' + k} | {v:.0f} | {runs} | {med['cohort'] / v:.2f} | "
              f"{peak[k]:.0f} |")
    print(f"\ncohort / PyTorch's best ({best}): {med['cohort'] / med[best]:.2f}")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps({"bench": "resnet_throughput", "model": a.model, "precision": a.precision,
                                "batch": a.batch, "threads": a.threads,
                                "freeze_below": a.freeze_below, "peak_rss_mb": peaks,
                                "steps": a.steps, "reps": a.reps, "rates": rates, "medians": med,
                                "best_torch": best, "ratio": med["cohort"] / med[best]}) + "\n")


def accuracy(a):
    with tempfile.TemporaryDirectory() as d:
        half = os.path.join(d, "phase1.safetensors")
        out = run(cohort_cmd(a, ["--lr", str(a.lr), "--epochs", str(a.epochs1), "--save", half]))
        out += run(cohort_cmd(a, ["--lr", str(a.lr2), "--epochs", str(a.epochs), "--resume", half]))
    print(out)
    cohort_acc = float(out.strip().splitlines()[-1].split()[2].rstrip("%"))
    tout = run(torch_cmd(a, a.torch_config, ["--lr", str(a.lr), "--lr2", str(a.lr2), "--lr2-from",
                                             str(a.epochs1 + 1), "--epochs", str(a.epochs)]))
    print(tout)
    torch_acc = float(tout.strip().splitlines()[-1].split()[2].rstrip("%"))
    print(f"| framework | test accuracy after {a.epochs} epochs |\n|---|---|\n| cohort | {cohort_acc:.2f}% |\n"
          f"| PyTorch ({a.torch_config}) | {torch_acc:.2f}% |")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps({"bench": "resnet_accuracy", "model": a.model, "precision": a.precision,
                                "epochs": a.epochs, "epochs1": a.epochs1, "lr": a.lr,
                                "lr2": a.lr2, "weight_decay": a.weight_decay, "batch": a.batch,
                                "cohort": cohort_acc, "pytorch": torch_acc, "torch_config": a.torch_config}) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-mnist", default=os.path.join(HERE, "..", "build", "examples", "train_mnist"))
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model", default="resnet", choices=["resnet", "mobilenet"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--lr2", type=float, default=0.005)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--torch-configs", nargs="+", default=list(TORCH_CONFIGS), choices=list(TORCH_CONFIGS))
    ap.add_argument("--freeze-below", type=int, default=0,
                    help="layers 0..N-1 frozen (cohort --freeze below:N; torch requires_grad_(False) + eval())")
    ap.add_argument("--accuracy", action="store_true")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--epochs1", type=int, default=9)
    ap.add_argument("--torch-config", default="eager", choices=list(TORCH_CONFIGS))
    ap.add_argument("--json", help="append the results to this JSON-lines file")
    a = ap.parse_args()
    accuracy(a) if a.accuracy else throughput(a)


if __name__ == "__main__":
    main()
