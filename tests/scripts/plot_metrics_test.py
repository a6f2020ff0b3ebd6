#!/usr/bin/env python3
"""scripts/plot_metrics.py draws a metrics file (two runs in one file, test loss present or not),
and names the file and line of a record it cannot read. Exit 77 (skipped) without matplotlib."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "plot_metrics.py")

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("COHORT_SKIP: matplotlib is not installed")
    sys.exit(77)


def record(epoch, loss, acc, test_loss=None):
    r = {"epoch": epoch, "complete": True, "train_loss": loss, "test_accuracy": acc}
    if test_loss is not None:
        r["test_loss"] = test_loss
    return json.dumps(r)


with tempfile.TemporaryDirectory() as tmp:
    metrics = os.path.join(tmp, "run.jsonl")
    with open(metrics, "w") as f:
        # A run of three epochs, then a second run starting again (the file is appended to).
        f.write("\n".join([record(0, 0.9, 80.1, 0.6), record(1, 0.5, 85.2, 0.45), record(2, 0.4, 87.0, 0.4),
                           record(0, 1.0, 79.0), record(1, 0.6, 84.0)]) + "\n")
    out = os.path.join(tmp, "curves.png")
    r = subprocess.run([sys.executable, SCRIPT, metrics, "-o", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert os.path.getsize(out) > 10000, os.path.getsize(out)

    # Both runs become curves: the legend names them.
    sys.path.insert(0, os.path.dirname(SCRIPT))
    import plot_metrics

    runs = plot_metrics.read_runs(metrics)
    assert [len(run) for run in runs] == [3, 2], [len(run) for run in runs]

    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(record(0, 0.9, 80.0) + "\n{not json\n")
    r = subprocess.run([sys.executable, SCRIPT, bad, "-o", out], capture_output=True, text=True)
    assert r.returncode != 0
    assert f"{bad}:2: not a JSON object" in r.stderr, r.stderr
print("plot_metrics: two runs drawn, a bad line named")
