#!/usr/bin/env python3
"""A scaling model of ProcessGroupDDP<Mpi> over a network (issue 21): measured inputs, a fitted
ring all-reduce with overlap, a check against measured multi-node runs, projections.

    sudo python3 bench/scaling_model.py measure --build build --out bench/scaling.jsonl
    python3 bench/scaling_model.py report --data bench/scaling.jsonl --plot bench/scaling.png

measure (root: it creates network namespaces with tests/mpi/netns_cluster.py's set-up) writes JSON
lines:
  buckets     each model's gradient buckets (collective_time --buckets: bytes, the layer whose
              backward completes the bucket)
  profile     each model's forward and backward milliseconds per layer, the optimiser step
              (profile_layers, batch 128, 1 thread)
  compute     each model's step time with N single-process trainers running at once (N = 1..4):
              what a rank computes when N ranks share this machine's 2 cores, without any
              communication
  collective  one bucket's all-reduce (reduce-scatter + all-gather, as the engine does it) by size,
              over N = 2, 3, 4 emulated nodes, at each link rate (collective_time under mpirun)
  ddp         train_mnist --parallel ddp step times over N = 2, 3, 4 emulated nodes, one rank each,
              at each link rate (the measured points the model must predict)

report fits, per link rate, alpha (per message step) and beta (seconds per byte) to the 2-node
collective times only, with the ring all-reduce's cost for a bucket of m bytes on N ranks

    c(m, N) = 2 (N - 1) alpha + 2 (N - 1) / N * m * beta         (reduce-scatter + all-gather)

and predicts a step as a timeline: forward, then backward layer by layer; a bucket's all-reduce
starts when backward has finished its layers and the link is free (buckets go one after the other),
so communication overlaps the rest of backward:

    T(N) = max(forward + backward, end of the last bucket) + optimiser step

The per-layer times come from the profile, scaled to the measured compute time with N ranks per
machine. The 3- and 4-node points and every ddp step are predictions, not fits. Projections to 8, 64
and 512 nodes use the 1-process compute time (a node with its own cores) and the fitted link.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("A", "D", "resnet")
SIZES = (4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)


# ---------------------------------------------------------------------------------------------
# measure


def run(cmd, timeout=900):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"scaling_model: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout + r.stderr


def step_seconds(out, global_batch):
    """train_mnist's partial-epoch line -> seconds per step."""
    samples_per_s = netns_cluster().partial_epoch_samples_per_s(out)
    if samples_per_s is None:
        sys.exit(f"scaling_model: no partial-epoch line in:\n{out}")
    return global_batch / samples_per_s


def parse_profile(out):
    layers, extra = [], {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\d+) (\S+)\s+([0-9.]+)\s+([0-9.]+)\s", line)
        if m:
            layers.append({"index": int(m[1]), "name": m[2], "fwd_ms": float(m[3]), "bwd_ms": float(m[4])})
            continue
        m = re.match(r"^(loss|optimizer step|other)\s+([0-9.]+)", line)
        if m:
            extra[m[1].replace(" ", "_")] = float(m[2])
    return layers, extra


def netns_cluster():
    """tests/mpi/netns_cluster.py: the emulated cluster's set-up, launch agent and mpirun line."""
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "mpi"))
    import netns_cluster as nc
    return nc


def measure(a):
    nc = netns_cluster()

    exe = lambda name: os.path.join(a.build, "bench" if name in ("collective_time", "profile_layers") else "examples", name)
    out = open(a.out, "a")

    def emit(rec):
        rec["date"] = time.strftime("%Y-%m-%d %H:%M")
        out.write(json.dumps(rec) + "\n")
        out.flush()
        print(json.dumps(rec), flush=True)

    for line in run([exe("collective_time"), "--buckets"]).splitlines():
        emit({"kind": "buckets", **json.loads(line)})
    for model in MODELS:
        layers, extra = parse_profile(run([exe("profile_layers"), "--model", model, "--batch", "128", "--threads", "1",
                                           "--steps", str(a.profile_steps)]))
        emit({"kind": "profile", "model": model, "layers": layers, **extra})
    os.makedirs(a.work, exist_ok=True)
    data = small_test_set(a.data_dir, os.path.join(a.work, "data"))
    steps = {"A": a.steps, "D": max(10, a.steps // 4), "resnet": max(10, a.steps // 3)}  # D and ResNet: slower steps
    train = lambda model, extra: [exe("train_mnist"), "--model", model, "--epochs", "1", "--max-steps",
                                  str(steps[model]), "--threads", "1", "--log-interval", "0", "--seed", "0", "--data-dir", data, *extra]
    # Compute alone: N trainers at once share the cores as N ranks do.
    for n in (1, 2, 3, 4):
        for model in MODELS:
            runs = []
            for _ in range(a.reps):
                procs = [subprocess.Popen(train(model, []), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                         for _ in range(n)]
                outs = [p.communicate(timeout=900)[0] for p in procs]
                runs.append(statistics.median(step_seconds(o, 128) for o in outs))
            emit({"kind": "compute", "model": model, "procs": n, "step_s": sorted(runs)})

    nc.args = argparse.Namespace(mpiexec=a.mpiexec, exe=None, per_node=1, nodes=None)
    os.makedirs(a.work, exist_ok=True)
    try:
        for rate in a.rates.split(","):
            for n in (2, 3, 4):
                nc.args.nodes = n
                nc.setup(n, "")
                for i in range(n):
                    shape(nc, f"{nc.PREFIX}n{i}", rate)
                agent, hostfile = nc.write_launcher(a.work, n)
                # Ranks share 2 cores: a waiting rank yields instead of spinning on them.
                extra = ("--mca", "mpi_yield_when_idle", "1")
                nc.args.exe = exe("collective_time")
                o = run(nc.mpirun_command(agent, hostfile, ["--sizes", ",".join(map(str, SIZES)), "--reps",
                                                            str(a.collective_reps)], extra))
                for line in o.splitlines():
                    if line.startswith("{"):
                        emit({"kind": "collective", "rate": rate, **json.loads(line)})
                nc.args.exe = exe("train_mnist")
                for model in MODELS:
                    runs = []
                    for _ in range(a.reps):
                        o = run(nc.mpirun_command(agent, hostfile, train(model, ["--parallel", "ddp"])[1:], extra))
                        runs.append(step_seconds(o, 128 * n))
                    emit({"kind": "ddp", "rate": rate, "world": n, "model": model, "step_s": sorted(runs)})
                nc.cleanup()
    finally:
        nc.cleanup()


def rate_bits(rate):
    """tc's rate ("10gbit", "100mbit") in bits per second."""
    return float(re.match(r"([0-9.]+)", rate)[1]) * {"k": 1e3, "m": 1e6, "g": 1e9}[re.search(r"([kmg])bit", rate)[1]]


def small_test_set(source, target):
    """The training files of `source` (linked) with a test set of its first 256 images: each run
    ends with an evaluation, which these step-time runs do not need (10,000 images take model D
    longer than its 10 steps)."""
    import gzip
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(source):
        path, dest = os.path.join(source, name), os.path.join(target, name)
        if os.path.exists(dest):
            continue
        if name.startswith("train"):
            os.symlink(path, dest)
        elif name.startswith("t10k"):
            raw = (gzip.open if name.endswith(".gz") else open)(path, "rb").read()
            images = "images" in name
            header = 16 if images else 8
            size = 28 * 28 if images else 1
            out = bytearray(raw[:header])
            out[4:8] = (256).to_bytes(4, "big")
            out += raw[header:header + 256 * size]
            (gzip.open if name.endswith(".gz") else open)(dest, "wb").write(bytes(out))
    return target


def shape(nc, ns, rate):
    """tc's token bucket at `rate` (netns_cluster's shape_data_link). Its burst is 400 us of the
    rate (at least 32 KB): a bucket much larger lets small messages through at memory speed, a
    much smaller one cannot reach 10 Gbit/s. (netns_cluster.py's tests use a fixed 256 KB.)"""
    nc.shape_data_link(ns, rate, str(max(32 * 1024, int(rate_bits(rate) / 8 * 400e-6))))


# ---------------------------------------------------------------------------------------------
# model


def load(path):
    recs = [json.loads(l) for l in open(path) if l.strip()]
    last = {}
    for r in recs:  # the latest record of each key wins (measure appends)
        key = (r["kind"], r.get("model"), r.get("procs"), r.get("rate"), r.get("world"), r.get("bytes"))
        last[key] = r
    return list(last.values())


def fit_link(recs, rate):
    """(alpha, beta_link, beta_host) from the collective times at every N of one link rate:

        c(m, N) = 2 (N-1) alpha + max(2 (N-1)/N m beta_link, 2 (N-1) m beta_host)

    beta_link is each node's own link (the ring's bandwidth term on a switched network);
    beta_host is what the emulation adds: every node's traffic crosses the one host's bridge on
    its 2 cores, a medium all nodes share (2 (N-1) m bytes per all-reduce in all).

    As for any alpha-beta model, alpha comes from small messages (<= 16 KiB, where the bytes cost
    next to nothing), the betas from messages of gradient-bucket size (>= 256 KiB: the buckets of
    models A, D and ResNet-20 are 1-9 MB, their small last buckets a few KB), by least squares on
    the relative error over a grid. beta_link is at least the configured rate's (8 / rate seconds
    per byte: a node cannot send faster than its link), which is all that can be said of it where
    the shared host is the bottleneck."""
    pts = [(r["bytes"], r["world"], r["median_s"]) for r in recs if r["kind"] == "collective" and r["rate"] == rate]
    small = [t / (2 * (n - 1)) for m, n, t in pts if m <= 16384]
    alpha = statistics.median(small)
    large = [(m, n, t) for m, n, t in pts if m >= 262144]
    grid = [10 ** (-11 + 4 * i / 400) for i in range(401)]  # 0.01 ns .. 100 ns per byte
    floor = 8 / rate_bits(rate)
    best = None
    for bl in [floor] + [g for g in grid if g > floor]:
        for bh in [0.0] + grid:
            err = sum(((2 * (n - 1) * alpha + max(2 * (n - 1) / n * m * bl, 2 * (n - 1) * m * bh)) / t - 1) ** 2
                      for m, n, t in large)
            if best is None or err < best[0]:
                best = (err, bl, bh)
    return alpha, best[1], best[2]


def ring_time(m, n, link, shared=True):
    """The all-reduce (reduce-scatter + all-gather) of m bytes over n nodes; without `shared`
    on a switched network (no host bridge: what a real cluster has)."""
    if n <= 1:
        return 0.0
    alpha, beta_link, beta_host = link
    bandwidth = 2 * (n - 1) / n * m * beta_link
    if shared:
        bandwidth = max(bandwidth, 2 * (n - 1) * m * beta_host)
    return 2 * (n - 1) * alpha + bandwidth


def step_time(profile, buckets, compute_s, n, link, overlap, shared=True):
    """The timeline of one step (seconds): backward layer by layer; a bucket's all-reduce starts
    when backward has finished its layers and the link is free. While the rank still computes,
    communication advances at `overlap` of the link's speed (1: fully hidden behind backward, 0:
    nothing moves until the rank waits), afterwards at full speed."""
    layers = profile["layers"]
    total_ms = sum(l["fwd_ms"] + l["bwd_ms"] for l in layers) + sum(
        profile.get(k, 0.0) for k in ("loss", "optimizer_step", "other"))
    k = compute_s / (total_ms / 1000)  # the profile's shares, at this configuration's compute time
    fwd = k * (sum(l["fwd_ms"] for l in layers) + profile.get("loss", 0.0)) / 1000
    bwd = {l["index"]: k * l["bwd_ms"] / 1000 for l in layers}
    tail = k * (profile.get("optimizer_step", 0.0) + profile.get("other", 0.0)) / 1000
    end_of_backward = fwd + sum(bwd.values())
    link_free = 0.0
    for b in buckets:  # in the order backward completes them
        start = max(fwd + sum(t for i, t in bwd.items() if i >= b["first_layer"]), link_free)
        work = ring_time(b["bytes"], n, link, shared)
        if start < end_of_backward:  # the link runs at `overlap` of its speed until backward ends
            during = overlap * (end_of_backward - start)
            link_free = start + work / overlap if during >= work > 0 else end_of_backward + (work - during)
        else:
            link_free = start + work
    return max(end_of_backward, link_free) + tail


def fit_overlap(checks_at_2, profile, buckets, compute, links):
    """The overlap fraction (0..1, steps of 0.01) that best predicts the 2-node step times."""
    best = None
    for i in range(101):
        f = i / 100
        err = 0.0
        for r in checks_at_2:
            pred = step_time(profile[r["model"]], buckets[r["model"]]["buckets"], compute[(r["model"], 2)], 2,
                             links[r["rate"]], f)
            err += (pred / statistics.median(r["step_s"]) - 1) ** 2
        if best is None or err < best[1]:
            best = (f, err)
    return best[0]


def report(a):
    recs = load(a.data)
    by = lambda kind, **kw: [r for r in recs if r["kind"] == kind and all(r.get(k) == v for k, v in kw.items())]
    buckets = {r["model"]: r for r in by("buckets")}
    profile = {r["model"]: r for r in by("profile")}
    compute = {(r["model"], r["procs"]): statistics.median(r["step_s"]) for r in by("compute")}
    rates = sorted({r["rate"] for r in by("collective")}, key=lambda s: -len(s))
    links = {rate: fit_link(recs, rate) for rate in rates}
    overlap = fit_overlap(by("ddp", world=2), profile, buckets, compute, links)
    lines = []
    p = lines.append
    p("**Link** (one all-reduce of m bytes over N emulated nodes, fitted to collective_time at N = 2, 3, 4; "
      "c(m, N) = 2(N-1) alpha + max(2(N-1)/N m beta_link, 2(N-1) m beta_host); alpha from messages <= 16 KiB, "
      "the betas from >= 256 KiB):\n")
    p("| link | alpha (us) | beta_link (ns/B) | per-node Gbit/s | beta_host (ns/B) | shared Gbit/s | "
      "worst error of c (>= 256 KiB) |")
    p("|---|---|---|---|---|---|---|")
    for rate in rates:
        alpha, bl, bh = links[rate]
        errs = [abs(ring_time(r["bytes"], r["world"], links[rate]) / r["median_s"] - 1)
                for r in by("collective", rate=rate) if r["bytes"] >= 262144]
        p(f"| {rate} | {alpha * 1e6:.1f} | {bl * 1e9:.3f} | {8 / bl / 1e9:.2f} | {bh * 1e9:.3f} | "
          f"{(8 / bh / 1e9) if bh > 0 else float('inf'):.2f} | {100 * max(errs):.0f}% |")
    p(f"\n**Overlap** (fitted to the 2-node step times of all models and links, the only fit to step "
      f"times): {overlap:.2f} of the link's speed while backward still runs.\n")
    p("**Measured against the model** (models A, D and ResNet-20, batch 128 per rank, 1 rank per node, 1 "
      "thread; medians of 3 runs; \"compute alone\": N single-process trainers at once, no communication):\n")
    p("| link | model | nodes | compute alone (ms) | measured step (ms) | predicted (ms) | error |")
    p("|---|---|---|---|---|---|---|")
    worst = 0.0
    checks = []
    for rate in rates:
        for model in MODELS:
            for r in sorted(by("ddp", rate=rate, model=model), key=lambda r: r["world"]):
                n = r["world"]
                meas = statistics.median(r["step_s"])
                pred = step_time(profile[model], buckets[model]["buckets"], compute[(model, n)], n, links[rate], overlap)
                err = pred / meas - 1
                checks.append((rate, model, n, meas, pred))
                worst = max(worst, abs(err))
                p(f"| {rate} | {model} | {n} | {1e3 * compute[(model, n)]:.1f} | {1e3 * meas:.1f} | {1e3 * pred:.1f} | "
                  f"{100 * err:+.1f}% |")
    p(f"\nWorst error: {100 * worst:.1f}% (the issue's bound: 15%).\n")
    p("**Projected efficiency** on a switched network (each node its own link: alpha and beta_link as "
      "fitted, no shared host; a node = one process of this machine's compute, 1 thread, its time alone; "
      "weak scaling, batch 128 per node):\n")
    ns = (2, 4, 8, 64, 512)
    p("| link | model | compute (ms) | gradients (MB) | " + " | ".join(f"{n} nodes" for n in ns) + " |")
    p("|" + "---|" * (4 + len(ns)))
    for rate in rates:
        for model in MODELS:
            t1 = compute[(model, 1)]
            mb = sum(b["bytes"] for b in buckets[model]["buckets"]) / 1e6
            effs = [t1 / step_time(profile[model], buckets[model]["buckets"], t1, n, links[rate], overlap, shared=False)
                    for n in ns]
            p(f"| {rate} | {model} | {1e3 * t1:.1f} | {mb:.2f} | " + " | ".join(f"{100 * e:.0f}%" for e in effs) + " |")
    text = "\n".join(lines)
    print(text)
    if a.plot:
        plot(a.plot, rates, links, profile, buckets, compute, checks, overlap)
    return 0 if worst <= 0.15 else 1


def plot(path, rates, links, profile, buckets, compute, checks, overlap):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    ns = [2, 3, 4, 6, 8, 16, 32, 64, 128, 256, 512]
    for rate, style in zip(rates, ("-", "--", ":")):
        for model, colour in zip(MODELS, ("tab:blue", "tab:orange", "tab:green")):
            t1 = compute[(model, 1)]
            eff = [t1 / step_time(profile[model], buckets[model]["buckets"], t1, n, links[rate], overlap, shared=False)
                   for n in ns]
            left.plot(ns, eff, style, color=colour, label=f"{model}, {rate}")
    left.set_xscale("log", base=2)
    left.set_ylim(0, 1.05)
    left.set_xlabel("nodes")
    left.set_ylabel("projected efficiency")
    left.set_title("projected efficiency, switched network (fitted alpha, beta_link)")
    left.legend(fontsize=7)
    for rate, marker in zip(rates, ("o", "s", "^")):
        xs = [1e3 * c[3] for c in checks if c[0] == rate]
        ys = [1e3 * c[4] for c in checks if c[0] == rate]
        right.scatter(xs, ys, marker=marker, label=rate)
    lo = min(min(1e3 * c[3] for c in checks), min(1e3 * c[4] for c in checks)) / 1.2
    hi = max(max(1e3 * c[3] for c in checks), max(1e3 * c[4] for c in checks)) * 1.2
    right.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    right.plot([lo, hi], [1.15 * lo, 1.15 * hi], "k:", lw=0.6)
    right.plot([lo, hi], [lo / 1.15, hi / 1.15], "k:", lw=0.6)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("measured step (ms), 2-4 emulated nodes")
    right.set_ylabel("predicted step (ms)")
    right.set_title("model against measurement (dotted: 15%)")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--build", default="build")
    m.add_argument("--out", default=os.path.join(HERE, "scaling.jsonl"))
    m.add_argument("--work", default="/tmp/cohort-scaling")
    m.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    m.add_argument("--mpiexec", default="mpirun")
    m.add_argument("--rates", default="10gbit,1gbit")
    m.add_argument("--steps", type=int, default=40, help="steps per train_mnist run of model A (D: a quarter, ResNet-20: a third)")
    m.add_argument("--reps", type=int, default=3)
    m.add_argument("--profile-steps", type=int, default=10)
    m.add_argument("--collective-reps", type=int, default=15)
    r = sub.add_parser("report")
    r.add_argument("--data", default=os.path.join(HERE, "scaling.jsonl"))
    r.add_argument("--plot")
    a = ap.parse_args()
    sys.exit(measure(a) if a.cmd == "measure" else report(a))
