#!/usr/bin/env python3
"""ThreadedReplicas scaling: training samples/s of 2 replicas x 1 intra-op thread against one
device with 1 thread (and with 2 threads), same model, alternating, medians of --reps processes
(each the median of timed windows, cohort_throughput's protocol).

    DataParallel semantics      --replicas 2 --batch B         (each replica gets B/2)
    DDP semantics               --replicas 2 --batch 2B        (each replica gets B)
    deterministic mode          --replicas 2 --batch B --deterministic   (4 chunks of B/4)

    python3 bench/replicas_scaling.py --models A B C --batch 128 --reps 5 --json bench/replicas.jsonl --markdown
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import append_jsonl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def rate(exe, model, batch, threads, replicas=0, deterministic=False, iters=30):
    cmd = [exe, "--model", model, "--mode", "train", "--batch", str(batch), "--threads", str(threads),
           "--iters", str(iters), "--repeats", "5", "--warmup", "5"]
    if replicas:
        cmd += ["--replicas", str(replicas)]
    if deterministic:
        cmd += ["--deterministic"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cohort", default=os.path.join(ROOT, "build", "bench", "cohort_throughput"))
    ap.add_argument("--models", nargs="+", default=["A"])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    b = a.batch
    configs = [("1 device, 1 thread", dict(batch=b, threads=1)),
               ("1 device, 2 threads", dict(batch=b, threads=2)),
               (f"2 replicas x 1 thread, batch {b} (DataParallel)", dict(batch=b, threads=1, replicas=2)),
               (f"2 replicas x 1 thread, batch {2 * b} (DDP)", dict(batch=2 * b, threads=1, replicas=2)),
               (f"2 replicas x 1 thread, batch {b}, deterministic", dict(batch=b, threads=1, replicas=2,
                                                                          deterministic=True))]
    rows = []
    for m in a.models:
        runs = {name: [] for name, _ in configs}
        iters = 3 if m == "D" else 30
        for rep in range(a.reps):
            for name, kw in configs:
                runs[name].append(rate(a.cohort, m, iters=iters, **kw))
        base = statistics.median(runs[configs[0][0]])
        for name, kw in configs:
            med = statistics.median(runs[name])
            rows.append({"model": m, "configuration": name, "samples_per_s": round(med, 1),
                         "vs_1_thread": round(med / base, 3), "runs": runs[name], **kw})
            print(f"{m}  {name:48} {med:9.0f} samples/s  x{med / base:.2f} of 1 device x 1 thread", flush=True)
    if a.markdown:
        print("\n| model | configuration | samples/s | x 1 device, 1 thread |\n|---|---|---|---|")
        for r in rows:
            print(f"| {r['model']} | {r['configuration']} | {r['samples_per_s']:.0f} | {r['vs_1_thread']:.2f} |")
    append_jsonl(a.json, rows)


if __name__ == "__main__":
    main()
