#!/usr/bin/env python3
"""train_on_device --windows (issue 33), run by train_on_device_omp on the CPU: one JSON line per
precision of --precision, each with --windows window times, their median's ms per step and
samples/s, written to stdout and appended to --timing; tf32 is fp32 with allow_tf32 set; and
--no-shuffle --log-interval 1 --max-steps N prints exactly N step losses (what gpu-check.sh's
correctness stage compares). Exit 77 without Fashion-MNIST.

    train_on_device_timing.py <train_on_device_omp> <work dir>
"""
import json
import os
import re
import statistics
import subprocess
import sys

exe, work = sys.argv[1], sys.argv[2]
data = "/usr/share/datasets/fashion-mnist"
if not os.path.isdir(data):
    print(f"COHORT_SKIP: no Fashion-MNIST in {data}")
    sys.exit(77)
os.makedirs(work, exist_ok=True)
timing = os.path.join(work, "timing.jsonl")
if os.path.exists(timing):
    os.remove(timing)
failures = []


def check(cond, what):
    print(("ok:     " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


env = dict(os.environ, OMP_NUM_THREADS="2")
p = subprocess.run([exe, "--model", "C", "--precision", "fp32,tf32,bf16", "--windows", "3", "--warmup-steps", "1",
                    "--window-steps", "2", "--batch-size", "32", "--timing", timing, "--data-dir", data],
                   capture_output=True, text=True, env=env, timeout=600)
print(p.stdout[-2000:], p.stderr[-2000:])
check(p.returncode == 0, f"the timing run exits 0 (got {p.returncode})")
printed = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
written = [json.loads(l) for l in open(timing)] if os.path.exists(timing) else []
check(printed == written and len(written) == 3, f"one line per precision, printed and appended ({len(written)})")
for rec, precision in zip(written, ("fp32", "tf32", "bf16")):
    check(rec["precision"] == precision and rec["model"] == "C" and rec["batch"] == 32, f"{precision}: its run")
    check(rec["allow_tf32"] == (precision == "tf32"), f"{precision}: allow_tf32 {rec['allow_tf32']}")
    check(len(rec["window_ms"]) == 3 and all(ms > 0 for ms in rec["window_ms"]), f"{precision}: three windows")
    median = statistics.median(rec["window_ms"])
    check(abs(rec["ms_per_step"] - median / 2) <= 1e-3 * median, f"{precision}: ms per step from the median window")
    check(abs(rec["samples_per_s"] - 32000.0 / rec["ms_per_step"]) <= 1e-3 * rec["samples_per_s"],
          f"{precision}: samples/s from ms per step")

p = subprocess.run([exe, "--model", "C", "--max-steps", "4", "--no-shuffle", "--log-interval", "1", "--batch-size", "32",
                    "--data-dir", data], capture_output=True, text=True, env=env, timeout=600)
steps = re.findall(r"\]\s+training loss: ([0-9.]+)", p.stdout)
check(p.returncode == 0 and len(steps) == 4, f"--max-steps 4 --log-interval 1 prints 4 step losses ({steps})")

p = subprocess.run([exe, "--model", "C", "--precision", "fp32,int8"], capture_output=True, text=True, timeout=60)
check(p.returncode == 2 and "usage" in p.stderr, "an unknown precision is refused with the usage")

print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
