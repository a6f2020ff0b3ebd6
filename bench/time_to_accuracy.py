#!/usr/bin/env python3
"""Time to 93% on Fashion-MNIST (issue 36): wall time from process start to the first evaluation at
or above the target on the 10,000 test images, cohort against PyTorch running the identical recipe.

    .venv/bin/python bench/time_to_accuracy.py                       # 5 seeds per side, alternating
    .venv/bin/python bench/time_to_accuracy.py --seeds 1 --sides cohort --epochs 6   # one cohort run
    .venv/bin/python bench/time_to_accuracy.py torch --seed 0 --config channels_last  # one PyTorch run

Run it with the Python that has torch (.venv/bin/python, set up by scripts/install-python.sh): the
PyTorch children are started with the same interpreter (sys.executable).

The recipe (RECIPE below), the same on both sides: the FastResNet network (cohort::models::FastResNet,
its twin fast_resnet() in tests/reference/cohort_modules.py), each framework's default
initialisation (kaiming-uniform, torch's reset_parameters; each side its own generator), SGD with
Nesterov momentum and weight decay 5e-4 except on BatchNorm parameters and biases, OneCycleLR
stepped per optimiser step (linear anneal, torch's default momentum cycling 0.85-0.95), batch 256,
label smoothing 0.1, RandomCrop(28, padding=2) with a raw 0 pixel + RandomHorizontalFlip, an
exponential moving average of the weights and BatchNorm buffers after every step (torch's
AveragedModel(get_ema_multi_avg_fn(decay), use_buffers=True)), which is what is evaluated, after
every epoch (the fixed evaluation points), at batch 1000, with flip test-time augmentation (each
test image's scores averaged with its mirror's: cohort's --tta flip, airbench's
0.5 * net(x) + 0.5 * net(x.flip(-1)); --tta none gives the 2026-12-02 recipe).

What is timed: from just before the child process is started to the moment its epoch line with a
test accuracy at or above the target arrives (both sides flush that line as the evaluation ends):
data loading, `import torch`, and torch.compile's compilation (for that configuration) are
included, as a user pays them; the compilation of the C++ program is not, and is reported
separately (its unit's time from the Ninja log). Peak memory is each child's maxrss.

PyTorch's configuration: by default the fastest of eager, channels_last and torch.compile (with
channels_last) for this recipe, chosen by a probe in the same run (--probe-steps steps of each, in
separate processes: projected time = the probe's warm-up, compilation included, plus the recipe's
steps at the probe's steady step time); --torch-config fixes it instead.

Output: one JSON line per run appended to --json, and a Markdown table of medians.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = "/usr/share/datasets/fashion-mnist"

RECIPE = {
    "model": "fast", "epochs": 12, "batch_size": 256, "lr": 0.2, "momentum": 0.9, "weight_decay": 5e-4,
    "pct_start": 0.25, "label_smoothing": 0.1, "crop": 2, "flip": True, "ema": 0.99, "eval_batch_size": 1000,
    "tta": "flip",
}


def steps_per_epoch(r):
    return (60000 + r["batch_size"] - 1) // r["batch_size"]


def cohort_command(a, r, seed):
    total = r["epochs"] * steps_per_epoch(r)
    return [a.train_mnist, "--model", r["model"], "--threads", str(a.threads), "--epochs", str(r["epochs"]),
            "--batch-size", str(r["batch_size"]), "--optimizer", "sgd", "--lr", str(r["lr"]),
            "--momentum", str(r["momentum"]), "--nesterov", "--weight-decay", str(r["weight_decay"]),
            "--no-decay-on-norms", "--lr-schedule",
            f"onecycle,max_lr={r['lr']},total_steps={total},pct_start={r['pct_start']},anneal=linear",
            "--schedule-per-step", "--label-smoothing", str(r["label_smoothing"]),
            "--augment", f"crop={r['crop']},flip" if r["flip"] else f"crop={r['crop']}",
            "--ema", str(r["ema"]), "--eval-batch-size", str(r["eval_batch_size"]), "--tta", r["tta"],
            "--target-accuracy", str(a.target), "--seed", str(seed), "--log-interval", "0",
            "--data-dir", a.data_dir]


def torch_command(a, seed, config, probe_steps=0):
    cmd = [sys.executable, os.path.abspath(__file__), "torch", "--seed", str(seed), "--config", config,
           "--threads", str(a.threads), "--target", str(a.target), "--epochs", str(a.epochs), "--data-dir", a.data_dir,
           "--tta", a.tta]
    return cmd + (["--probe-steps", str(probe_steps)] if probe_steps else [])


EPOCH_LINE = re.compile(r"^epoch (\d+)[^:]*:.*test accuracy ([0-9.]+)%")


def timed_run(cmd, target):
    """Runs cmd; returns (seconds to the first epoch line at or above target or None, accuracies per
    epoch, total seconds, peak RSS MiB, output)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    reached, accuracies, lines = None, [], []
    for line in p.stdout:
        now = time.perf_counter() - t0
        lines.append(line)
        m = EPOCH_LINE.match(line.strip())
        if m:
            acc = float(m.group(2))
            accuracies.append(acc)
            if reached is None and acc >= target:
                reached = now
    _, status, usage = os.wait4(p.pid, 0)
    total = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("time_to_accuracy: failed: " + " ".join(cmd) + "\n" + "".join(lines[-20:]))
    return reached, accuracies, total, usage.ru_maxrss / 1024, "".join(lines)


def fma_peak(path, threads):
    """fma_peak's GFLOP/s for this thread count (its JSON line), or None without the program."""
    if not path or not os.path.exists(path):
        return None
    out = subprocess.run([path], capture_output=True, text=True).stdout.strip().splitlines()
    try:
        peak = json.loads(out[-1])
    except (IndexError, ValueError):
        return None
    return peak.get(f"gflops_{threads}_thread" + ("s" if threads > 1 else ""))


def check_release_tree(program):
    """Refuses a train_mnist from scripts/test.sh's tree: it is built at -O2 for the tests (about
    half the speed) and its benchmarks compile only."""
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(program))), "CMakeCache.txt")
    if not os.path.exists(program):
        sys.exit(f"time_to_accuracy: no {program}: build a Release tree first:\n  cmake -S . -B build-bench -G Ninja "
                 "-DCMAKE_BUILD_TYPE=Release -DCOHORT_BUILD_TESTS=OFF -DCOHORT_BENCH_COMPILE_ONLY=OFF\n"
                 "  cmake --build build-bench --target train_mnist fma_peak")
    if os.path.exists(cache):
        with open(cache) as f:
            text = f.read()
        if "COHORT_BENCH_COMPILE_ONLY:BOOL=ON" in text:
            sys.exit(f"time_to_accuracy: {program} is from the test tree (-O2, benchmarks compile-only): "
                     "point --train-mnist at a Release tree (see --help)")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def unit_compile_seconds(build_dir, model):
    """The train_mnist unit of `model`'s compile time from the Ninja log (its last build)."""
    log = os.path.join(build_dir, ".ninja_log")
    if not os.path.exists(log):
        return None
    seconds = None
    with open(log) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 4 and parts[3].endswith(f"model_{model}.cpp.o"):
                seconds = (int(parts[1]) - int(parts[0])) / 1000
    return seconds


# ---------------------------------------------------------------------------------------------------
# The PyTorch side (a child process: `time_to_accuracy.py torch ...`)

def torch_main(argv):
    ap = argparse.ArgumentParser(prog="time_to_accuracy.py torch")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--config", default="channels_last", choices=["eager", "channels_last", "compile"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target", type=float, default=93.0)
    ap.add_argument("--epochs", type=int, default=RECIPE["epochs"])
    ap.add_argument("--data-dir", default=DATA)
    ap.add_argument("--probe-steps", type=int, default=0, help="time this many steps and stop (the config probe)")
    ap.add_argument("--tta", default=RECIPE["tta"], choices=["flip", "none"])
    a = ap.parse_args(argv)
    start = time.perf_counter()
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    from cohort_modules import fast_resnet
    from torch_train_mnist import load

    r = dict(RECIPE, epochs=a.epochs, tta=a.tta)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr, xte, yte, pad = load(a.data_dir)
    fmt = torch.contiguous_format if a.config == "eager" else torch.channels_last
    net = fast_resnet().to(memory_format=fmt)
    decay = [p for n, p in net.named_parameters() if not (p.ndim <= 1 or n.endswith(".bias"))]
    no_decay = [p for n, p in net.named_parameters() if p.ndim <= 1 or n.endswith(".bias")]
    opt = torch.optim.SGD([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=r["lr"],
                          momentum=r["momentum"], nesterov=True, weight_decay=r["weight_decay"])
    per_epoch = steps_per_epoch(r)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=r["lr"], total_steps=r["epochs"] * per_epoch,
                                                pct_start=r["pct_start"], anneal_strategy="linear")
    swa = torch.optim.swa_utils
    ema = swa.AveragedModel(net, multi_avg_fn=swa.get_ema_multi_avg_fn(r["ema"]), use_buffers=True)
    model = torch.compile(net) if a.config == "compile" else net
    g = torch.Generator().manual_seed(a.seed)
    rows = torch.arange(28)
    c = r["crop"]

    def augment(x):  # RandomCrop(28, padding=c) with a raw 0 pixel, then RandomHorizontalFlip, per sample
        n = x.shape[0]
        padded = F.pad(x[:, 0], (c,) * 4, value=pad)
        dy = torch.randint(0, 2 * c + 1, (n,), generator=g)
        dx = torch.randint(0, 2 * c + 1, (n,), generator=g)
        out = padded[torch.arange(n)[:, None, None], (dy[:, None] + rows)[:, :, None], (dx[:, None] + rows)[:, None, :]]
        flip = torch.rand(n, generator=g) < 0.5
        out[flip] = out[flip].flip(-1)
        return out.unsqueeze(1)

    def evaluate():
        ema.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(xte), r["eval_batch_size"]):
                x = xte[i:i + r["eval_batch_size"]].contiguous(memory_format=fmt)
                scores = ema(x)
                if r["tta"] == "flip":  # airbench's test-time augmentation, as cohort's --tta flip
                    scores = 0.5 * scores + 0.5 * ema(x.flip(-1).contiguous(memory_format=fmt))
                correct += int((scores.argmax(1) == yte[i:i + r["eval_batch_size"]]).sum())
        return 100.0 * correct / len(xte)

    net.train()
    step, warm = 0, None
    for epoch in range(r["epochs"]):
        order = torch.randperm(len(xtr), generator=g)
        for b in range(0, len(order), r["batch_size"]):
            idx = order[b:b + r["batch_size"]]
            x = augment(xtr[idx]).contiguous(memory_format=fmt)
            loss = F.cross_entropy(model(x), ytr[idx], label_smoothing=r["label_smoothing"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            ema.update_parameters(net)
            step += 1
            if a.probe_steps:
                if step == 5:
                    warm = time.perf_counter()
                if step == 5 + a.probe_steps:
                    print(json.dumps({"warmup_s": warm - start, "step_s": (time.perf_counter() - warm) / a.probe_steps}),
                          flush=True)
                    return
        acc = evaluate()
        print(f"epoch {epoch}: {time.perf_counter() - start:.2f} s since the start, test accuracy {acc:.2f}%",
              flush=True)
        if acc >= a.target:
            return


# ---------------------------------------------------------------------------------------------------

def median(xs):
    return statistics.median(xs) if xs else None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "torch":
        return torch_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--target", type=float, default=93.0)
    ap.add_argument("--epochs", type=int, default=RECIPE["epochs"], help="the schedule's length (epochs)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sides", nargs="+", default=["cohort", "torch"], choices=["cohort", "torch"])
    ap.add_argument("--torch-config", default="auto", choices=["auto", "eager", "channels_last", "compile"])
    ap.add_argument("--probe-steps", type=int, default=30)
    ap.add_argument("--train-mnist", default=os.path.join(ROOT, "build-bench", "examples", "train_mnist"),
                    help="train_mnist of a Release tree (cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release "
                         "-DCOHORT_BUILD_TESTS=OFF -DCOHORT_BENCH_COMPILE_ONLY=OFF)")
    ap.add_argument("--fma-peak", default=None, help="fma_peak (default: the --train-mnist tree's bench/fma_peak)")
    ap.add_argument("--data-dir", default=DATA)
    ap.add_argument("--json", default=os.path.join(HERE, "time_to_accuracy.jsonl"))
    ap.add_argument("--tta", default=RECIPE["tta"], choices=["flip", "none"],
                    help="evaluation's test-time augmentation, both sides (none: the 2026-12-02 recipe)")
    a = ap.parse_args()
    recipe = dict(RECIPE, epochs=a.epochs, tta=a.tta)
    if "cohort" in a.sides:
        check_release_tree(a.train_mnist)
    if a.fma_peak is None:
        a.fma_peak = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.train_mnist))), "bench", "fma_peak")
    machine = {"cpu": cpu_name(), "threads": a.threads, "fma_peak_gflops": fma_peak(a.fma_peak, a.threads)}
    print(f"machine: {machine['cpu']}, {a.threads} threads, FMA peak {machine['fma_peak_gflops']} GFLOP/s")
    compile_s = unit_compile_seconds(os.path.dirname(os.path.dirname(a.train_mnist)), recipe["model"])
    if "cohort" in a.sides:
        print(f"cohort: train_mnist's model_{recipe['model']} unit compiled in {compile_s} s (Ninja log; not timed)")

    config, probes = a.torch_config, {}
    if "torch" in a.sides and config == "auto":
        total_steps = recipe["epochs"] * steps_per_epoch(recipe)
        for c in ("eager", "channels_last", "compile"):
            out = subprocess.run(torch_command(a, a.first_seed, c, a.probe_steps), capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"time_to_accuracy: the torch probe for {c} failed:\n{out.stderr[-3000:]}")
            p = json.loads(out.stdout.strip().splitlines()[-1])
            p["projected_s"] = p["warmup_s"] + total_steps * p["step_s"]
            probes[c] = p
            print(f"torch probe {c}: warm-up {p['warmup_s']:.1f} s, {1000 * p['step_s']:.1f} ms/step, "
                  f"projected {p['projected_s']:.0f} s for {total_steps} steps")
        config = min(probes, key=lambda k: probes[k]["projected_s"])
        print(f"torch: fastest configuration for this recipe: {config}")

    results = {s: [] for s in a.sides}
    for i in range(a.seeds):
        seed = a.first_seed + i
        order = a.sides if i % 2 == 0 else list(reversed(a.sides))  # alternate which side goes first
        for side in order:
            cmd = cohort_command(a, recipe, seed) if side == "cohort" else torch_command(a, seed, config)
            reached, accs, total, rss, _ = timed_run(cmd, a.target)
            row = {"bench": "time_to_accuracy", "side": side, "config": "cohort fp32" if side == "cohort" else config,
                   "seed": seed, "target": a.target, "recipe": recipe, "seconds_to_target": reached,
                   "reached": reached is not None, "epochs_run": len(accs), "accuracies": accs,
                   "best_accuracy": max(accs) if accs else None, "process_s": total, "peak_rss_mib": rss,
                   "machine": machine, "date": time.strftime("%Y-%m-%d")}
            if side == "cohort":
                row["compile_s"] = compile_s
            elif probes:
                row["torch_probes"] = probes
            results[side].append(row)
            with open(a.json, "a") as f:
                f.write(json.dumps(row) + "\n")
            print(f"{side} seed {seed}: " + (f"{a.target}% after {reached:.1f} s" if reached else "target not reached") +
                  f" (epochs {len(accs)}, accuracies {accs}, peak {rss:.0f} MiB)", flush=True)

    print(f"\n| side | configuration | median s to {a.target}% | reached | accuracy at stop (min-max) % | "
          "epochs (median) | peak RSS MiB |")
    print("|---|---|---:|---:|---|---:|---:|")
    medians = {}
    for side, rows in results.items():
        times = [r["seconds_to_target"] for r in rows if r["reached"]]
        finals = [r["accuracies"][-1] for r in rows if r["accuracies"]]
        medians[side] = median(times)
        print(f"| {side} | {rows[0]['config']} | {medians[side]:.1f} | {len(times)}/{len(rows)} | "
              f"{min(finals):.2f}-{max(finals):.2f} | {median([r['epochs_run'] for r in rows])} | "
              f"{median([r['peak_rss_mib'] for r in rows]):.0f} |" if times else
              f"| {side} | {rows[0]['config']} | - | 0/{len(rows)} | {min(finals):.2f}-{max(finals):.2f} | "
              f"{median([r['epochs_run'] for r in rows])} | {median([r['peak_rss_mib'] for r in rows]):.0f} |")
    if medians.get("cohort") and medians.get("torch"):
        print(f"\ncohort is {medians['torch'] / medians['cohort']:.2f}x faster to {a.target}% (medians)")


if __name__ == "__main__":
    main()
