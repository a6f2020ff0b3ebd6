#!/usr/bin/env python3
"""The report of scripts/gpu-check.sh, and the comparisons its stages make. Standard library only
(it runs on the GPU machine, and in CI without one).

    gpu_report.py write DIR [OUTDIR...]         DIR's stage records -> report.md + report.jsonl,
                                                written (atomically) into DIR and each OUTDIR
    gpu_report.py compare-losses REF GOT --bound B [--envelope ENV [--factor F]] [--json FILE]
                                                the per-step losses two runs printed (the seed
                                                notebooks' "training loss: x" lines): exit 1
                                                when the step counts differ or step k's relative
                                                difference exceeds max(B, F x the drift between
                                                REF and ENV up to step k)
    gpu_report.py ncu-summary CSV --steps N [--json FILE]
                                                ncu --csv output (one metric per launch) -> the
                                                launches per step and the kernels by total time

DIR holds what the stages wrote: machine.txt, stages.jsonl (one record per stage: name, result,
seconds, limit), cuda_tests.summary, correctness_*.json, cohort.jsonl (train_on_device --windows),
torch.jsonl (bench/torch_gpu_seed.py), profile.json, nccl.jsonl.
"""
import argparse
import csv
import json
import os
import re
import sys

LOSS = re.compile(r"\]\s+training loss: (-?[0-9.eE+-]+|nan|inf)")


def lines(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return []
    with open(p, errors="replace") as f:
        return [l.rstrip("\n") for l in f]


def records(d, name):
    out = []
    for l in lines(d, name):
        l = l.strip()
        if l.startswith("{"):
            try:
                out.append(json.loads(l))
            except ValueError:
                pass
    return out


def load_json(d, name):
    p = os.path.join(d, name)
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def fmt(v, digits=3):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def torch_precision_matches(rec, precision):
    """A PyTorch configuration counts for cohort's precision when it computes in it."""
    return rec.get("precision") == precision


def timing_section(d):
    cohort = [r for r in records(d, "cohort.jsonl") if "ms_per_step" in r]
    torch = [r for r in records(d, "torch.jsonl") if "ms_per_step" in r]
    torch_failed = [r for r in records(d, "torch.jsonl") if "error" in r]
    out = ["", "## Training step time (warm-up excluded; median of the timed windows, CUDA events)", ""]
    if not cohort and not torch:
        return out + ["(not run)"], []
    out += ["| model | precision | cohort ms/step | cohort samples/s | cohort MiB | PyTorch best (config) | "
            "PyTorch ms/step | PyTorch samples/s | cohort / best speed |", "|---|---|---|---|---|---|---|---|---|"]
    summary = []
    keys = []
    for r in cohort + torch:
        k = (r.get("model"), r.get("precision"))
        if k not in keys:
            keys.append(k)
    for model, precision in keys:
        c = next((r for r in cohort if r.get("model") == model and r.get("precision") == precision), None)
        peers = [r for r in torch if r.get("model") == model and torch_precision_matches(r, precision)]
        best = min(peers, key=lambda r: r["ms_per_step"]) if peers else None
        ratio = best["ms_per_step"] / c["ms_per_step"] if c and best and c["ms_per_step"] > 0 else None
        out.append(f"| {model} | {precision} | {fmt(c and c['ms_per_step'])} | {fmt(c and c['samples_per_s'])} | "
                   f"{fmt(c and c.get('device_used_mib'))} | {best['config'] if best else '-'} | "
                   f"{fmt(best and best['ms_per_step'])} | {fmt(best and best['samples_per_s'])} | "
                   f"{fmt(ratio, 2) + 'x' if ratio else '-'} |")
        summary.append({"kind": "timing_summary", "model": model, "precision": precision,
                        "cohort_ms_per_step": c and c["ms_per_step"], "torch_best_config": best and best["config"],
                        "torch_best_ms_per_step": best and best["ms_per_step"], "cohort_speed_vs_best": ratio})
    if torch:
        out += ["", "Every PyTorch configuration:", "", "| model | config | ms/step | samples/s | max allocated MiB | "
                "device MiB | warm-up s |", "|---|---|---|---|---|---|---|"]
        for r in torch:
            out.append(f"| {r['model']} | {r['config']} | {fmt(r['ms_per_step'])} | {fmt(r['samples_per_s'])} | "
                       f"{fmt(r.get('max_memory_allocated_mib'))} | {fmt(r.get('device_used_mib'))} | "
                       f"{fmt(r.get('warmup_s'))} |")
    if cohort:
        out += ["", "cohort's host waits per step (its own count): " +
                ", ".join(f"{r['model']} {r['precision']} {fmt(r.get('host_waits_per_step'))}" for r in cohort)]
    for r in torch_failed:
        out.append(f"- PyTorch {r.get('model')} {r.get('config')} failed: {r.get('error')}")
    return out, summary


def write(args):
    d = args.dir
    r = ["# GPU check", "", "Written by scripts/gpu-check.sh (scripts/gpu_report.py); rewritten after every stage.",
         "", "## Machine", ""]
    r += ["    " + l for l in lines(d, "machine.txt")] or ["    (not probed)"]
    stages = records(d, "stages.jsonl")
    r += ["", "## Stages", "", "| stage | result | seconds | limit (s) | note |", "|---|---|---|---|---|"]
    for s in stages:
        r.append(f"| {s.get('stage')} | {s.get('result')} | {s.get('seconds')} | {s.get('limit_s')} | "
                 f"{s.get('note', '')} |")
    deadline = load_json(d, "deadline.json")
    if deadline:
        r += ["", f"Deadline {deadline.get('deadline_s')} s from the start; "
                  f"{deadline.get('elapsed_s', '?')} s used when this report was written."]
    r += ["", "## cohort_cuda_tests", ""] + (["    " + l for l in lines(d, "cuda_tests.summary")] or ["(not run)"])
    fails = [l for l in lines(d, "cuda_tests.log") + lines(d, "cuda_tests_ddp.log") if "ERROR" in l or "FATAL" in l]
    if fails:
        r += ["", "First failures:", ""] + ["    " + l for l in fails[:30]]
    r += ["", "## Correctness: ResNet-20 losses on the GPU against the CPU backend, same steps", ""]
    corr = [load_json(d, n) for n in sorted(os.listdir(d)) if n.startswith("correctness_") and n.endswith(".json")] \
        if os.path.isdir(d) else []
    corr = [c for c in corr if c]
    if corr:
        r += ["| run | steps | closest to its bound: step, relative difference, bound | bounds (first, last step) | "
              "result |", "|---|---|---|---|---|"]
        for c in corr:
            r.append(f"| {c['label']} | {c['steps']} | {c.get('worst_step')}: {fmt(c.get('worst_rel'))} / "
                     f"{fmt(c.get('worst_bound'))} | {fmt(c.get('bound_first', c['bound']))}, "
                     f"{fmt(c.get('bound_last', c['bound']))} | {'PASSED' if c['ok'] else 'FAILED: ' + c.get('why', '')} |")
    else:
        r.append("(not run)")
    timing, summary = timing_section(d)
    r += timing
    prof = load_json(d, "profile.json")
    r += ["", "## Profile: ResNet-20 training steps under ncu", ""]
    if prof:
        r.append(f"{prof['launches']} kernel launches in {prof['steps']} step(s): "
                 f"{fmt(prof['launches_per_step'])} per step, {fmt(prof['kernel_ms_per_step'])} ms of kernel time "
                 f"per step; host waits per step: {prof.get('host_waits_per_step', '-')}")
        r += ["", "| kernel | launches | total us | share |", "|---|---|---|---|"]
        for k in prof["top"]:
            r.append(f"| `{k['name'][:90]}` | {k['launches']} | {fmt(k['total_us'])} | {k['share']:.1%} |")
    else:
        r.append("(not run)")
    nccl = records(d, "nccl.jsonl")
    r += ["", "## Two NCCL ranks on one GPU (distinct NCCL_HOSTID)", ""]
    if nccl:
        r += ["| case | rank | result |", "|---|---|---|"]
        for n in nccl:
            what = ", ".join(f"{k} {v}" for k, v in n.items() if k not in ("case", "rank"))
            r.append(f"| {n.get('case')} | {n.get('rank')} | {what} |")
    else:
        r.append("(not run)")
    text = "\n".join(r) + "\n"
    jsonl = [dict(kind="stage", **s) for s in stages] + summary
    jsonl += [dict(kind="cohort_timing", **x) for x in records(d, "cohort.jsonl")]
    jsonl += [dict(kind="torch_timing", **x) for x in records(d, "torch.jsonl")]
    jsonl += [dict(kind="correctness", **c) for c in corr]
    if prof:
        jsonl.append(dict(kind="profile", **prof))
    jsonl += [dict(kind="nccl", **n) for n in nccl]
    for o in [d] + list(args.outdirs):
        os.makedirs(o, exist_ok=True)
        for name, content in (("report.md", text), ("report.jsonl", "".join(json.dumps(x) + "\n" for x in jsonl))):
            tmp = os.path.join(o, name + ".tmp")
            with open(tmp, "w") as f:
                f.write(content)
            os.replace(tmp, os.path.join(o, name))
    if args.print:
        print(text)
    return 0


def losses(path):
    with open(path, errors="replace") as f:
        return [float(m.group(1)) for m in LOSS.finditer(f.read())]


def compare_losses(args):
    """Step k's relative difference must be within bound(k): --bound alone, or with --envelope
    max(--bound, --factor x the largest relative difference of the envelope run up to step k).
    Training amplifies rounding: two correct runs that sum in different orders drift apart step
    by step (ResNet-20, 50 steps of Adam: 1e-6 at step 1, 7% by step 49 between cohort's own
    AVX-512 and AVX2 kernels), so the envelope is such a pair, measured where the reference is."""
    ref, got = losses(args.ref), losses(args.got)
    result = {"label": args.label or os.path.basename(args.got), "steps": len(got), "reference_steps": len(ref),
              "bound": args.bound, "max_rel": None, "worst_step": None, "ok": False}
    bounds = [args.bound] * len(ref)
    if args.envelope:
        env = losses(args.envelope)
        if len(env) != len(ref):
            result["why"] = f"the envelope run has {len(env)} losses, the reference {len(ref)}"
            ref = []
        else:
            drift = 0.0
            for k, (e, r) in enumerate(zip(env, ref)):
                drift = max(drift, abs(e - r) / max(abs(r), 1e-6))
                bounds[k] = max(args.bound, args.factor * drift)
            result.update(envelope_factor=args.factor, bound_first=bounds[0], bound_last=bounds[-1])
    if not ref:
        result.setdefault("why", "no reference losses")
    elif not got or len(ref) != len(got):
        result["why"] = f"{len(got)} losses against {len(ref)} reference losses"
    else:
        rel = [abs(a - b) / max(abs(b), 1e-6) for a, b in zip(got, ref)]
        margin = [r / b if r == r else float("inf") for r, b in zip(rel, bounds)]
        worst = max(range(len(rel)), key=lambda i: margin[i])
        result.update(max_rel=max(rel), worst_step=worst, worst_rel=rel[worst], worst_bound=bounds[worst],
                      ok=all(m <= 1 for m in margin), first=[got[0], ref[0]], last=[got[-1], ref[-1]])
        if not result["ok"]:
            result["why"] = (f"step {worst}: {got[worst]} against {ref[worst]}, relative difference "
                             f"{rel[worst]:.3g} > bound {bounds[worst]:.3g}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def ncu_summary(args):
    """ncu --csv --metrics gpu__time_duration.sum: one row per launch (ID) and metric."""
    launches = {}
    with open(args.csv, errors="replace") as f:
        text = f.read()
    start = text.find('"ID"')
    if start < 0:
        print("ncu-summary: no CSV table in " + args.csv, file=sys.stderr)
        return 1
    for row in csv.DictReader(text[start:].splitlines()):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        us = value / 1000.0 if unit.startswith("n") else value if unit.startswith("u") else value * 1000.0
        launches[row["ID"]] = (row["Kernel Name"], us)
    by_name = {}
    for name, us in launches.values():
        n, t = by_name.get(name, (0, 0.0))
        by_name[name] = (n + 1, t + us)
    total = sum(t for _, t in by_name.values()) or 1.0
    top = sorted(by_name.items(), key=lambda kv: -kv[1][1])[:args.top]
    result = {"steps": args.steps, "launches": len(launches), "launches_per_step": len(launches) / args.steps,
              "kernel_ms_per_step": total / 1000.0 / args.steps, "distinct_kernels": len(by_name),
              "top": [{"name": n, "launches": c, "total_us": t, "share": t / total} for n, (c, t) in top]}
    if args.host_waits is not None:
        result["host_waits_per_step"] = args.host_waits
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f)
    print(json.dumps(result))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("outdirs", nargs="*")
    w.add_argument("--print", action="store_true")
    c = sub.add_parser("compare-losses")
    c.add_argument("ref")
    c.add_argument("got")
    c.add_argument("--bound", type=float, required=True, help="the smallest bound (every step)")
    c.add_argument("--envelope", help="a second reference run, summed in another order (the drift's measure)")
    c.add_argument("--factor", type=float, default=4.0, help="bound(k) = max(bound, factor x envelope drift to k)")
    c.add_argument("--json")
    c.add_argument("--label")
    n = sub.add_parser("ncu-summary")
    n.add_argument("csv")
    n.add_argument("--steps", type=int, required=True)
    n.add_argument("--top", type=int, default=12)
    n.add_argument("--host-waits", type=float)
    n.add_argument("--json")
    a = ap.parse_args()
    return {"write": write, "compare-losses": compare_losses, "ncu-summary": ncu_summary}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
