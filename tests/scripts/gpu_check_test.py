#!/usr/bin/env python3
"""scripts/gpu-check.sh `all` without a GPU (issue 33): a stage that hangs is cut at its limit,
clipped to the deadline; a stage past the deadline is skipped; every GPU stage is recorded as
skipped; the report (markdown and JSON lines) reaches $OUT after every stage; the exit status is
77. Then scripts/gpu_report.py's comparisons on made-up inputs: the loss comparison passes within
its bound and fails beyond it or on a missing step, ncu's CSV becomes launches per step, and the
timing table gives cohort's speed against PyTorch's best configuration per model and precision.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
failures = []


def check(cond, what):
    print(("ok:     " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def report_py(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gpu_report.py"), *args],
                          capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    work, out = os.path.join(tmp, "work"), os.path.join(tmp, "out")
    env = dict(os.environ, GPU_CHECK_DIR=work, OUT=out, GPU_DEADLINE_S="14", GPU_REPORT_RESERVE_S="4",
               GPU_CHECK_SELFTEST="1", GPU_CHECK_FORCE_NO_GPU="1", PYTHON=sys.executable)
    t0 = time.monotonic()
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu-check.sh"), "all"], env=env, capture_output=True,
                       text=True, timeout=120)
    took = time.monotonic() - t0
    print(p.stderr[-3000:])
    check(p.returncode == 77, f"exit status 77 without a GPU (got {p.returncode})")
    check(took < 14 + 8, f"the run ends near its 14 s deadline (took {took:.1f} s)")
    stages = {}
    jsonl = os.path.join(out, "report.jsonl")
    check(os.path.exists(jsonl), "report.jsonl in $OUT")
    if os.path.exists(jsonl):
        for line in open(jsonl):
            rec = json.loads(line)
            if rec.get("kind") == "stage":
                stages[rec["stage"]] = rec
    hang = stages.get("selftest_hang", {})
    check(hang.get("result") == "TIMEOUT", f"the hanging stage is recorded as TIMEOUT ({hang})")
    check("clipped from 600 s" in hang.get("note", "") and hang.get("limit_s", 999) <= 10,
          f"its 600 s limit was clipped to the time left ({hang.get('limit_s')} s)")
    late = stages.get("selftest_after_deadline", {})
    check(late.get("result") == "SKIPPED" and "deadline" in late.get("note", ""),
          f"a stage after the deadline is skipped ({late})")
    for s in ("cuda_tests", "correctness_fp32", "cohort_resnet", "torch_eager", "profile", "nccl_two_ranks",
              "torch_compile"):
        check(stages.get(s, {}).get("result") == "SKIPPED", f"GPU stage {s} recorded as skipped")
    md = open(os.path.join(out, "report.md")).read() if os.path.exists(os.path.join(out, "report.md")) else ""
    check("| selftest_hang | TIMEOUT |" in md, "report.md in $OUT shows the timeout")
    logs = os.path.join(out, "gpu-check-logs.tgz")
    names = subprocess.run(["tar", "-tzf", logs], capture_output=True, text=True).stdout if os.path.exists(logs) else ""
    check("selftest_hang.log" in names, "the stage logs are archived into $OUT")
    check(len(os.listdir(out)) <= 8, f"at most 8 files in $OUT, the device tool's limit ({sorted(os.listdir(out))})")

    # Killed mid-run (as the device tool kills a command at its limit): $OUT already holds the
    # report of the stages before.
    killed_out = os.path.join(tmp, "killed")
    env_k = dict(env, GPU_CHECK_DIR=os.path.join(tmp, "work_k"), OUT=killed_out, GPU_DEADLINE_S="300")
    k = subprocess.Popen(["bash", os.path.join(ROOT, "scripts", "gpu-check.sh"), "all"], env=env_k,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not os.path.exists(os.path.join(tmp, "work_k", "selftest_hang.log")):
        time.sleep(0.2)
    time.sleep(0.5)
    os.killpg(k.pid, 9)
    k.wait()
    kmd = os.path.join(killed_out, "report.md")
    check(os.path.exists(kmd) and "| probe | PASSED |" in open(kmd).read(),
          "a run killed during a stage has left the report of the stages before it in $OUT")

    # The loss comparison: the seed notebooks' progress lines of two runs.
    def losses(path, values):
        with open(path, "w") as f:
            for i, v in enumerate(values):
                f.write(f"epoch: 0 [{i}/469 (0%)]\ttraining loss: {v:.6f}\n")
    ref, close, far, short = (os.path.join(tmp, n) for n in ("ref", "close", "far", "short"))
    base = [2.302585 - 0.01 * i for i in range(50)]
    losses(ref, base)
    losses(close, [v * (1 + 1e-4) for v in base])
    losses(far, [v * (1 + (3e-3 if i == 37 else 0)) for i, v in enumerate(base)])
    losses(short, base[:49])
    r = report_py("compare-losses", ref, close, "--bound", "2e-3")
    check(r.returncode == 0 and json.loads(r.stdout)["ok"], "losses within the bound pass")
    r = report_py("compare-losses", ref, far, "--bound", "2e-3")
    res = json.loads(r.stdout)
    check(r.returncode == 1 and res["worst_step"] == 37, f"a step beyond the bound fails and is named ({res})")
    r = report_py("compare-losses", ref, short, "--bound", "2e-3")
    check(r.returncode == 1 and "49 losses against 50" in json.loads(r.stdout).get("why", ""),
          "a missing step fails")

    # With an envelope (a second correct run's drift from the reference), step k's bound is
    # max(bound, factor x the drift up to k): early steps tight, later ones wider.
    env = os.path.join(tmp, "env")
    losses(env, [v * (1 + (1e-5 if i < 10 else 1e-2)) for i, v in enumerate(base)])
    late, early = os.path.join(tmp, "late"), os.path.join(tmp, "early")
    losses(late, [v * (1 + (2.5e-2 if i == 40 else 0)) for i, v in enumerate(base)])
    losses(early, [v * (1 + (5e-4 if i == 3 else 0)) for i, v in enumerate(base)])
    r = report_py("compare-losses", ref, late, "--bound", "1e-4", "--envelope", env, "--factor", "3")
    check(r.returncode == 0, f"a late step within 3x the envelope's drift passes ({r.stdout.strip()[:200]})")
    r = report_py("compare-losses", ref, early, "--bound", "1e-4", "--envelope", env, "--factor", "3")
    res = json.loads(r.stdout)
    check(r.returncode == 1 and res["worst_step"] == 3, f"an early step beyond its tight bound fails ({res.get('why')})")

    # ncu --csv: launches per step and kernels by time.
    csv_path = os.path.join(tmp, "profile.csv")
    with open(csv_path, "w") as f:
        f.write("==PROF== Connected to process\n")
        f.write('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
                '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n')
        for i in range(6):
            name = "conv_forward" if i % 3 else "gemm"
            f.write(f'"{i}","1","t","h","{name}","1","7","(256, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler '
                    f'metrics","gpu__time_duration.sum","nsecond","{1000 * (i + 1)}"\n')
    r = report_py("ncu-summary", csv_path, "--steps", "2", "--host-waits", "1.5")
    prof = json.loads(r.stdout) if r.returncode == 0 else {}
    check(prof.get("launches") == 6 and prof.get("launches_per_step") == 3.0, f"ncu launches per step ({prof})")
    check(prof.get("top", [{}])[0].get("name") == "conv_forward" and abs(prof["kernel_ms_per_step"] - 0.0105) < 1e-9,
          "ncu kernels ranked by total time")

    # The timing table: cohort against PyTorch's best configuration of the same precision.
    tdir = os.path.join(tmp, "timing")
    os.makedirs(tdir)
    with open(os.path.join(tdir, "cohort.jsonl"), "w") as f:
        f.write(json.dumps({"framework": "cohort", "model": "resnet", "precision": "bf16", "ms_per_step": 2.0,
                            "samples_per_s": 64000.0, "host_waits_per_step": 1.0}) + "\n")
    with open(os.path.join(tdir, "torch.jsonl"), "w") as f:
        for config, ms in (("cl-bf16", 3.0), ("cl-bf16-compile", 1.0), ("nchw-fp32", 0.5)):
            f.write(json.dumps({"framework": "pytorch", "model": "resnet", "config": config,
                                "precision": config.split("-")[1], "ms_per_step": ms,
                                "samples_per_s": 128000.0 / ms}) + "\n")
    r = report_py("write", tdir)
    md = open(os.path.join(tdir, "report.md")).read()
    check(r.returncode == 0 and "| resnet | bf16 | 2 | 64,000 | - | cl-bf16-compile | 1 |" in md and "| 0.5x |" in md,
          "the timing table compares with the fastest PyTorch configuration of the same precision")

print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
