#!/usr/bin/env python3
"""Plots bench/sweep.py's JSON lines as seed 003 did: epoch time against dataset repeat, one line
per (model, batch size), first epoch dashed and second epoch solid; a second panel shows the test
accuracy after the last epoch.

    python3 bench/plot_sweep.py                                    # bench/sweep_cpu.jsonl -> bench/sweep_cpu.png
    python3 bench/plot_sweep.py --threads 2 --out bench/sweep_cpu.png sweep_a.jsonl sweep_b.jsonl

Needs matplotlib (pip install matplotlib). Lines marked "partial" (smoke tests) are left out
(runs of one epoch show only the first-epoch line);
when a configuration appears more than once, the last line wins.
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", default=[os.path.join(HERE, "sweep_cpu.jsonl")])
    ap.add_argument("--out", default=os.path.join(HERE, "sweep_cpu.png"))
    ap.add_argument("--threads", type=int, nargs="+", help="only these thread counts (default: all, one line each)")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()

    rows = {}
    for path in a.inputs:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)
                if r.get("partial") or r.get("first epoch time") is None:
                    continue
                if a.threads and r.get("threads", 1) not in a.threads:
                    continue
                k = (r["model_size"], r["batch_size"], r.get("threads", 1), r["n_dataset_repeat"])
                rows[k] = r
    if not rows:
        raise SystemExit(f"plot_sweep: no complete configurations in {', '.join(a.inputs)}")

    series = sorted({k[:3] for k in rows}, key=lambda s: (s[0] != "small", s[1], s[2]))
    several_threads = len({s[2] for s in series}) > 1
    fig, (ax_t, ax_a) = plt.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [3, 2]})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = {"small": "o", "large": "s"}
    for i, (size, batch, threads) in enumerate(series):
        pts = sorted((k[3], r) for k, r in rows.items() if k[:3] == (size, batch, threads))
        xs = [d for d, _ in pts]
        label = f"{size} ({pts[0][1].get('model', '?')}), batch {batch}"
        if several_threads:
            label += f", {threads} thread(s)"
        c = colours[i % len(colours)]
        second = [(d, r["second epoch time"]) for d, r in pts if r.get("second epoch time") is not None]
        ax_t.plot([d for d, _ in second], [t for _, t in second], "-", marker=markers.get(size, "o"), color=c,
                  label=label if second else None)
        ax_t.plot(xs, [r["first epoch time"] for _, r in pts], "--", marker=markers.get(size, "o"), color=c,
                  mfc="none", alpha=0.7, label=None if second else label)
        accs = [r.get("test_accuracy") for _, r in pts]
        ax_a.plot(xs, accs, "-", marker=markers.get(size, "o"), color=c, label=label)
        for x, acc in zip(xs, accs):
            if acc is not None:
                ax_a.annotate(f"{acc:.1f}", (x, acc), textcoords="offset points", xytext=(4, 4), fontsize=7,
                              color=c)
    repeats = sorted({k[3] for k in rows})
    ax_t.set_xlabel("dataset repeat (x 60k images)")
    ax_t.set_ylabel("epoch time (s)")
    ax_t.set_yscale("log")
    ax_t.set_xticks(repeats)
    ax_t.grid(True, which="both", alpha=0.3)
    ax_t.plot([], [], "k-", label="second epoch")
    ax_t.plot([], [], "k--", label="first epoch")
    ax_t.legend(fontsize=8)
    ax_t.set_title("training epoch time")
    ax_a.set_xlabel("dataset repeat (x 60k images)")
    ax_a.set_ylabel("test accuracy after the last epoch (%)")
    ax_a.set_xticks(repeats)
    ax_a.grid(True, alpha=0.3)
    ax_a.set_title("test accuracy")
    any_row = next(iter(rows.values()))
    threads = sorted({k[2] for k in rows})
    fig.suptitle(a.title or f"seed 003 sweep on the CPU with cohort: {any_row.get('dataset', '')}, "
                 f"{any_row.get('epochs', 2)} epochs, {'/'.join(map(str, threads))} thread(s), "
                 f"{any_row.get('machine', '')}")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out} ({len(rows)} configurations)")


if __name__ == "__main__":
    main()
