#!/usr/bin/env python3
"""Runs cohort (cohort_throughput) and PyTorch (torch_throughput.py) on the same configurations
in the same session, alternating, and prints the ratio table (medians over repetitions) with
cohort's achieved GFLOP/s and its fraction of the machine's measured FMA peak. Nothing else
should run meanwhile.

    python3 bench/compare_torch.py --json bench/results.jsonl            # the full grid (see --dry-run)
    python3 bench/compare_torch.py --models A C --modes infer --threads 1 2 --reps 5 --markdown
    python3 bench/compare_torch.py --no-torch --models A --batches 128   # cohort alone

Grid: models x modes x threads x batch, where training uses --batches and inference (eval mode,
forward only) uses --infer-batch. Each repetition runs one process per side and configuration,
rotating which side goes first; each process reports the median of --windows timed windows, and
the table shows the median over --reps processes.

Data (--data): real (the default: Fashion-MNIST batches rotating through the shuffled training
set, on both sides) or synthetic (one fixed random batch, the old regime; labelled as such).
--flush-denormal runs both sides with subnormals flushed (FTZ/DAZ); the default is IEEE.

PyTorch in its best configuration: every configuration of --torch-configs runs in every
repetition (those marked "2+ threads" only with more than one thread), and the one with the
best median is compared; the table shows every configuration's median and names the best:
  eager              torch.set_num_threads(t), OMP_NUM_THREADS/MKL_NUM_THREADS unset
  fused              eager with the fused optimiser (SGD, Adam; Adadelta has none)
  channels_last      model and inputs in channels_last, fused optimiser
  compile            torch.compile(model), fused optimiser (compiled in the untimed warm-up)
  channels_last_mkl1 channels_last with BLAS (MKL: the Linear layers) held to one thread:
                     MKL_NUM_THREADS=1 and --blas-threads 1 (2+ threads)
  mkl1               eager, BLAS held to one thread (2+ threads)
  omp                eager with OMP_NUM_THREADS=t and MKL_NUM_THREADS=t as well (2+ threads)
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Rough samples/s at 1 thread on the reference machine (training at batch 128, inference at 1000).
# They only choose the steps per timed window and estimate the run time; no result uses them.
GUESS = {
    "cohort": {"train": {"A": 6600, "B": 6700, "C": 16000, "D": 240},
               "infer": {"A": 22000, "B": 18000, "C": 47000, "D": 770}},
    "torch": {"train": {"A": 3000, "B": 3500, "C": 3600, "D": 165},
              "infer": {"A": 5500, "B": 7000, "C": 5200, "D": 360}},
}
STARTUP_S = {"cohort": 0.2, "torch": 2.5}  # process start (importing torch takes ~2 s)
THREAD_SPEEDUP = 1.7  # guessed speed-up of 2 threads, for the estimate only

TORCH_CONFIGS = {
    "eager": ([], {}),
    "fused": (["--fused"], {}),
    "channels_last": (["--channels-last", "--fused"], {}),
    "compile": (["--compile", "--fused"], {}),
    "channels_last_mkl1": (["--channels-last", "--fused", "--blas-threads", "1"], {"MKL_NUM_THREADS": "1"}),
    "mkl1": (["--blas-threads", "1"], {"MKL_NUM_THREADS": "1"}),
    "omp": ([], {"OMP_NUM_THREADS": "{t}", "MKL_NUM_THREADS": "{t}"}),
}
MULTI_THREAD_ONLY = {"channels_last_mkl1", "mkl1", "omp"}
STARTUP_EXTRA_S = {"compile": 15.0}  # torch.compile's compilation, in the warm-up


def guess_rate(side, mode, model, threads):
    return GUESS[side][mode][model] * (THREAD_SPEEDUP if threads > 1 else 1.0)


def clean_env(extra, threads):
    """The environment of one run: ours without thread variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env.update({k: v.format(t=threads) for k, v in extra.items()})
    return env


def run_json(cmd, env):
    """Runs one measuring process; returns its last stdout line as JSON, or raises with its stderr."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {p.returncode}: {p.stderr.strip()[-800:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure_peak(a):
    """{threads: GFLOP/s} from --peak-gflops or by running fma_peak."""
    if a.peak_gflops:
        p1 = a.peak_gflops[0]
        p2 = a.peak_gflops[1] if len(a.peak_gflops) > 1 else 2 * p1
        return {1: p1, 2: p2}, "given"
    exe = a.fma_peak or os.path.join(os.path.dirname(os.path.abspath(a.cohort)), "fma_peak")
    if not os.path.exists(exe):
        print(f"note: {exe} not found (build the fma_peak target, or give --peak-gflops): no % of peak",
              file=sys.stderr)
        return {}, None
    r = run_json([exe], clean_env({}, 1))
    return {1: r["gflops_1_thread"], 2: r["gflops_2_threads"]}, exe


def peak_for(peaks, threads):
    if threads in peaks:
        return peaks[threads]
    return peaks[1] * min(threads, os.cpu_count() or threads) if 1 in peaks else None


def plan(a):
    """The configurations in run order, each with its protocol and estimated seconds."""
    configs = []
    for model in a.models:
        for mode in a.modes:
            for threads in a.threads:
                for batch in (a.batches if mode == "train" else [a.infer_batch]):
                    fast = max(guess_rate("cohort", mode, model, threads),
                               0 if a.no_torch else guess_rate("torch", mode, model, threads))
                    iters = a.iters or max(2, round(a.window_seconds * fast / batch))
                    warmup = a.warmup if a.warmup is not None else min(20, max(2, math.ceil(0.5 * fast / batch)))
                    tcfgs = [] if a.no_torch else [n for n in a.torch_configs
                                                   if threads > 1 or n not in MULTI_THREAD_ONLY]
                    steps = warmup + a.windows * iters

                    def secs(side):
                        return STARTUP_S[side] + steps * batch / guess_rate(side, mode, model, threads)

                    est = a.reps * (secs("cohort") + len(tcfgs) * secs("torch") +
                                    sum(STARTUP_EXTRA_S.get(n, 0.0) for n in tcfgs))
                    configs.append(dict(model=model, mode=mode, batch=batch, threads=threads, iters=iters,
                                        warmup=warmup, torch_configs=tcfgs, estimate_s=est))
    return configs


def fmt_duration(s):
    s = int(round(s))
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def measure(a, c, peaks):
    args = ["--model", c["model"], "--mode", c["mode"], "--batch", str(c["batch"]), "--threads", str(c["threads"]),
            "--iters", str(c["iters"]), "--warmup", str(c["warmup"]), "--repeats", str(a.windows),
            "--data", a.data] + (["--flush-denormal"] if a.flush_denormal else [])
    cohort_env = {"COHORT_CONV_ALGORITHM": a.conv_algorithm} if a.conv_algorithm else {}
    sides = [("cohort", [a.cohort] + args, clean_env(cohort_env, c["threads"]))]
    for name in c["torch_configs"]:
        extra_args, extra_env = TORCH_CONFIGS[name]
        sides.append((name, [a.python, os.path.join(HERE, "torch_throughput.py")] + args + extra_args,
                      clean_env(extra_env, c["threads"])))
    runs = {name: [] for name, _, _ in sides}
    for rep in range(a.reps):
        k = rep % len(sides)  # rotate who goes first, so drift and cache state hit every side alike
        for name, cmd, env in sides[k:] + sides[:k]:
            runs[name].append(run_json(cmd, env))
    med = {name: statistics.median(r["samples_per_s"] for r in rs) for name, rs in runs.items()}
    cm = med["cohort"]
    flops = runs["cohort"][0]["flops_per_sample"]
    peak = peak_for(peaks, c["threads"])
    row = {"data": a.data, "flush_denormal": a.flush_denormal, "model": c["model"], "mode": c["mode"], "batch": c["batch"], "threads": c["threads"], "reps": a.reps,
           "warmup": c["warmup"], "iters": c["iters"], "windows": a.windows,
           "flops_per_sample": flops, "cohort_samples_per_s": round(cm, 1),
           "cohort_gflops": round(cm * flops / 1e9, 2),
           "peak_gflops": peak, "cohort_fraction_of_peak": round(cm * flops / 1e9 / peak, 4) if peak else None,
           "cohort_peak_rss_mib": max(r["peak_rss_mib"] for r in runs["cohort"]),
           "cohort_conv_algorithm": runs["cohort"][0].get("conv_algorithm", "auto"),
           "cohort_runs_samples_per_s": [r["samples_per_s"] for r in runs["cohort"]]}
    if c["torch_configs"]:
        best = max(c["torch_configs"], key=lambda n: med[n])
        tm = med[best]
        t0 = runs[best][0]
        if t0["flops_per_sample"] != flops:
            print(f"warning: FLOPs per sample differ: cohort {flops}, torch {t0['flops_per_sample']}", file=sys.stderr)
        row.update({"torch_samples_per_s": round(tm, 1), "torch_config": best,
                    "torch_configs_samples_per_s": {n: round(med[n], 1) for n in c["torch_configs"]},
                    "torch_gflops": round(tm * flops / 1e9, 2), "ratio": round(cm / tm, 3),
                    "torch_peak_rss_mib": max(r["peak_rss_mib"] for r in runs[best]),
                    "torch_mkl_threads": t0.get("mkl_threads"), "torch_version": t0["torch"],
                    "torch_runs_samples_per_s": [r["samples_per_s"] for r in runs[best]]})
    return row


COLUMNS = ["model", "mode", "batch", "threads", "cohort samples/s", "PyTorch best samples/s (config)", "ratio",
           "PyTorch configurations (samples/s)", "cohort GFLOP/s", "% of peak", "peak RSS cohort / torch (MiB)"]


def cells(r):
    has_t = "torch_samples_per_s" in r
    pct = f"{100 * r['cohort_fraction_of_peak']:.1f}%" if r.get("cohort_fraction_of_peak") is not None else "-"
    alg = r.get("cohort_conv_algorithm", "auto")
    return [r["model"] + ("" if alg == "auto" else f" ({alg})"), r["mode"], str(r["batch"]), str(r["threads"]), f"{r['cohort_samples_per_s']:.0f}",
            f"{r['torch_samples_per_s']:.0f} ({r['torch_config']})" if has_t else "-",
            f"{r['ratio']:.2f}" if has_t else "-",
            ", ".join(f"{n} {v:.0f}" for n, v in r["torch_configs_samples_per_s"].items()) if has_t else "-",
            f"{r['cohort_gflops']:.1f}", pct,
            f"{r['cohort_peak_rss_mib']:.0f} / {r['torch_peak_rss_mib']:.0f}" if has_t
            else f"{r['cohort_peak_rss_mib']:.0f} / -"]


def print_tables(rows, markdown):
    for mode, title in (("train", "Training"), ("infer", "Inference (eval mode, forward only)")):
        part = [r for r in rows if r["mode"] == mode]
        if not part:
            continue
        print(f"\n{'### ' if markdown else ''}{title}\n")
        table = [cells(r) for r in part]
        if markdown:
            print("| " + " | ".join(COLUMNS) + " |")
            print("|" + "---|" * len(COLUMNS))
            for t in table:
                print("| " + " | ".join(t) + " |")
        else:
            width = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(COLUMNS)]
            print("  ".join(h.ljust(w) for h, w in zip(COLUMNS, width)))
            for t in table:
                print("  ".join(v.rjust(w) if i >= 2 else v.ljust(w) for i, (v, w) in enumerate(zip(t, width))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cohort", default=os.path.join(ROOT, "build", "bench", "cohort_throughput"),
                    help="path to cohort_throughput (default: build/bench/cohort_throughput)")
    ap.add_argument("--python", default=sys.executable, help="Python with torch (default: this one)")
    ap.add_argument("--models", nargs="+", default=["A", "B", "C", "D"], choices="ABCD")
    ap.add_argument("--modes", nargs="+", default=["train", "infer"], choices=["train", "infer"])
    ap.add_argument("--batches", nargs="+", type=int, default=[128, 256, 512], help="training batch sizes")
    ap.add_argument("--infer-batch", type=int, default=1000, help="inference batch size")
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--reps", type=int, default=3, help="processes per side and configuration (median)")
    ap.add_argument("--windows", type=int, default=3, help="timed windows per process (median)")
    ap.add_argument("--window-seconds", type=float, default=1.0,
                    help="aim of a timed window's length, from guessed rates (sets the steps per window)")
    ap.add_argument("--iters", type=int, help="steps per timed window (overrides --window-seconds)")
    ap.add_argument("--warmup", type=int, help="untimed steps first (default: ~0.5 s worth, 2 to 20)")
    ap.add_argument("--torch-configs", nargs="+", default=["eager", "fused", "channels_last", "compile",
                                                             "channels_last_mkl1"],
                    choices=sorted(TORCH_CONFIGS), help="PyTorch configurations (the best is compared)")
    ap.add_argument("--data", default="real", choices=["real", "synthetic"],
                    help="real: Fashion-MNIST batches in shuffled order; synthetic: one fixed random batch")
    ap.add_argument("--flush-denormal", action="store_true", help="both sides flush subnormals (FTZ/DAZ)")
    ap.add_argument("--no-torch", action="store_true", help="measure cohort alone")
    ap.add_argument("--conv-algorithm", choices=["auto", "direct", "f2", "f4"],
                    help="cohort's convolution algorithm (COHORT_CONV_ALGORITHM; default: the environment's, else auto)")
    ap.add_argument("--fma-peak", help="path to fma_peak (default: next to cohort_throughput)")
    ap.add_argument("--peak-gflops", nargs="+", type=float, metavar=("ONE_THREAD", "TWO_THREADS"),
                    help="the machine's FMA peak instead of running fma_peak")
    ap.add_argument("--json", help="append one JSON line per configuration to this file")
    ap.add_argument("--markdown", action="store_true", help="print the tables in Markdown (for bench/RESULTS.md)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and the estimated time, run nothing")
    a = ap.parse_args()

    configs = plan(a)
    total = sum(c["estimate_s"] for c in configs)
    print(f"{len(configs)} configurations x {a.reps} repetitions; estimated time {fmt_duration(total)} "
          f"(from guessed rates; refined as it runs)", flush=True)
    if a.dry_run:
        for c in configs:
            print(f"  {c['model']} {c['mode']:5} b={c['batch']:<4} t={c['threads']}  warmup {c['warmup']:2} + "
                  f"{a.windows} x {c['iters']:3} steps  torch {'/'.join(c['torch_configs']) or '-':12} "
                  f"~{fmt_duration(c['estimate_s'])}")
        return
    if not os.path.exists(a.cohort):
        sys.exit(f"compare_torch: {a.cohort} not found; build it: "
                 "cmake --build build --target cohort_throughput fma_peak")

    peaks, peak_source = measure_peak(a)
    if peaks:
        print(f"FMA peak: {peaks[1]:.1f} GFLOP/s with 1 thread, {peaks[2]:.1f} with 2 ({peak_source})", flush=True)
    rows = []
    start, estimated_done = time.monotonic(), 0.0
    for i, c in enumerate(configs):
        try:
            row = measure(a, c, peaks)
        except RuntimeError as e:
            print(f"{c['model']} {c['mode']} b={c['batch']} t={c['threads']}: FAILED: {e}", file=sys.stderr, flush=True)
            continue
        row.update({"machine": platform.node(), "cpu_count": os.cpu_count(), "peak_source": peak_source,
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S")})
        rows.append(row)
        estimated_done += c["estimate_s"]
        elapsed = time.monotonic() - start
        left = sum(x["estimate_s"] for x in configs[i + 1:]) * elapsed / estimated_done
        t = (f"torch {row['torch_samples_per_s']:9.1f}/s ({row['torch_config']})  ratio {row['ratio']:5.2f}  "
             f"rss {row['cohort_peak_rss_mib']:.0f} vs {row['torch_peak_rss_mib']:.0f} MiB"
             if "ratio" in row else f"rss {row['cohort_peak_rss_mib']:.0f} MiB")
        pct = f" {100 * row['cohort_fraction_of_peak']:4.1f}% of peak" if row["cohort_fraction_of_peak"] else ""
        print(f"[{i + 1}/{len(configs)}] {c['model']} {c['mode']:5} b={c['batch']:<4} t={c['threads']}  "
              f"cohort {row['cohort_samples_per_s']:9.1f}/s {row['cohort_gflops']:6.1f} GFLOP/s{pct}  {t}  "
              f"[{fmt_duration(elapsed)} elapsed, ~{fmt_duration(left)} left]", flush=True)
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    if rows and "torch_version" in rows[0]:
        data = ("real Fashion-MNIST batches, rotating through the shuffled training set" if a.data == "real"
                else "SYNTHETIC: one fixed random batch stepped repeatedly")
        print(f"\nPyTorch {rows[0]['torch_version']}; data: {data}; subnormals "
              f"{'flushed (FTZ/DAZ)' if a.flush_denormal else 'IEEE'}; medians of {a.reps} processes per side, each the "
              f"median of {a.windows} timed windows; % of peak: cohort GFLOP/s / fma_peak for that thread count")
    print_tables(rows, a.markdown)


if __name__ == "__main__":
    main()
