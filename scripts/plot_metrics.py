#!/usr/bin/env python3
"""Draws training curves from the metrics a cohort run appends (train_mnist --metrics FILE,
TrainerOptions::metrics): training loss, test loss where recorded, and test accuracy per epoch.

    scripts/plot_metrics.py run.jsonl -o curves.png
    scripts/plot_metrics.py a.jsonl b.jsonl -o compare.png --title "A vs B"

One JSON object per line; a file that holds several runs (the epoch count starting again) is
drawn as several curves. Lines that are not JSON objects fail with the file and line number.
Needs matplotlib (scripts/install-python.sh puts it in .venv).
"""
import argparse
import json
import sys


def read_runs(path):
    """The runs in one metrics file: lists of epoch records, split where the epoch goes back."""
    runs, current, last_epoch = [], [], None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_metrics: {path}:{number}: not a JSON object ({e.msg})")
            if not isinstance(record, dict) or "epoch" not in record:
                sys.exit(f"plot_metrics: {path}:{number}: expected an object with an \"epoch\" member, found {line.strip()[:80]}")
            epoch = record["epoch"]
            if last_epoch is not None and epoch <= last_epoch and current:
                runs.append(current)
                current = []
            current.append(record)
            last_epoch = epoch
    if current:
        runs.append(current)
    if not runs:
        sys.exit(f"plot_metrics: {path}: no epochs recorded")
    return runs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("metrics", nargs="+", help="metrics JSON-lines files")
    p.add_argument("-o", "--output", required=True, help="image to write (.png, .svg, .pdf)")
    p.add_argument("--title", default=None)
    args = p.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_metrics: needs matplotlib (pip install matplotlib, or scripts/install-python.sh)")

    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for path in args.metrics:
        runs = read_runs(path)
        for i, run in enumerate(runs):
            label = path if len(runs) == 1 else f"{path} (run {i + 1})"
            # Epochs are recorded 0-based; people count from 1.
            epochs = [r["epoch"] + 1 for r in run]
            loss_ax.plot(epochs, [r.get("train_loss") for r in run], marker="o", label=f"{label}: training")
            test_loss = [r.get("test_loss") for r in run]
            if any(v is not None for v in test_loss):
                loss_ax.plot(epochs, test_loss, marker="s", linestyle="--", label=f"{label}: test")
            acc_ax.plot(epochs, [r.get("test_accuracy") for r in run], marker="o", label=label)
    loss_ax.set(xlabel="epoch", ylabel="loss", title="loss")
    acc_ax.set(xlabel="epoch", ylabel="test accuracy (%)", title="test accuracy")
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
        ax.xaxis.get_major_locator().set_params(integer=True)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"plot_metrics: wrote {args.output}")


if __name__ == "__main__":
    main()
