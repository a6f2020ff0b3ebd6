#!/usr/bin/env python3
"""Regenerates the PyTorch fixtures into a temporary directory and checks that the committed
ones are unchanged: same files, tensors, shapes and dtypes; integers equal; floats within
RTOL (2e-5) of each tensor's largest magnitude (different CPUs or torch builds may round BLAS sums
differently, which is not a change of reference). Exit status 1 on any difference.

    python3 tests/reference/check_reference.py
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch  # noqa: F401  (the generator needs it)
    from safetensors.numpy import load_file
except ImportError as e:  # ctest reports exit code 77 as "skipped"
    print(f"skipped: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
COMMITTED = os.path.join(HERE, "fixtures")
# The committed fixtures come from an AVX-512 machine (Sapphire Rapids); torch on an AVX2-only
# CPU (Zen 3, 2026-11-29) sums in other orders: measured 7.3e-6 of the largest value at worst
# (a bias three SGD steps into block_residual_identity, whose gradient is a sum over N*H*W with
# cancellation), 1.6e-6 for model B's first gradients. A change of the generator or of torch's
# definitions moves values by far more.
RTOL = 2e-5
# Parameters after Adam steps amplify rounding differences of tiny gradient entries (see
# tests/models/seed_models.cpp); a different CPU's BLAS may move them by this much (measured
# 2.75e-4 for model D on Zen 3 against the AVX-512 fixtures).
ADAM_AFTER_RTOL = 1e-3
# Tensors that are analytically zero (model B's conv biases before BatchNorm have zero gradients)
# hold only rounding noise, which differs between CPUs: such a tensor (its largest value under
# NOISE of the largest value of its group, e.g. every "g0." gradient) must stay that small.
NOISE = 1e-5


def group_scales(tensors):
    """Largest magnitude per name prefix ("g0.", "after.", ...)."""
    scales = {}
    for k, v in tensors.items():
        if v.size and np.issubdtype(v.dtype, np.floating):
            g = k.split(".", 1)[0]
            scales[g] = max(scales.get(g, 0.0), float(np.max(np.abs(v))))
    return scales


def main():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "make_reference.py"), "--out", tmp], check=True)
        fresh = sorted(f for f in os.listdir(tmp) if f.endswith(".safetensors"))
        committed = sorted(f for f in os.listdir(COMMITTED) if f.endswith(".safetensors"))
        problems = []
        if fresh != committed:
            problems.append(f"file sets differ: only fresh {set(fresh) - set(committed)}, "
                            f"only committed {set(committed) - set(fresh)}")
        worst = 0.0
        for f in sorted(set(fresh) & set(committed)):
            a, b = load_file(os.path.join(tmp, f)), load_file(os.path.join(COMMITTED, f))
            if a.keys() != b.keys():
                problems.append(f"{f}: tensor names differ: {sorted(set(a) ^ set(b))}")
                continue
            groups = group_scales(b)
            for k in a:
                x, y = a[k], b[k]
                if x.dtype != y.dtype or x.shape != y.shape:
                    problems.append(f"{f}:{k}: {x.dtype}{x.shape} vs committed {y.dtype}{y.shape}")
                elif np.issubdtype(x.dtype, np.integer):
                    if not np.array_equal(x, y):
                        problems.append(f"{f}:{k}: integer values differ")
                elif y.size and (group := groups.get(k.split(".", 1)[0], 0.0)) > 0 and \
                        float(np.max(np.abs(y))) < NOISE * group:
                    if float(np.max(np.abs(x))) >= NOISE * group:
                        problems.append(f"{f}:{k}: analytically zero in the committed fixture, "
                                        f"{float(np.max(np.abs(x))) / group:.3g} of its group's largest value now")
                else:
                    scale = max(float(np.max(np.abs(y))) if y.size else 0.0, 1e-30)
                    err = float(np.max(np.abs(x.astype(np.float64) - y))) / scale if y.size else 0.0
                    worst = max(worst, err)
                    limit = ADAM_AFTER_RTOL if f in ("model_C.safetensors", "model_D.safetensors") and k.startswith("after.") else RTOL
                    if err > limit:
                        problems.append(f"{f}:{k}: differs by {err:.3g} of its largest value (limit {limit})")
        for p in problems:
            print("MISMATCH", p)
        print(f"checked {len(committed)} fixtures, worst relative difference {worst:.3g}")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
