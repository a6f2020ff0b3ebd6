"""Writes tests/reference/fixtures/cross_entropy_options.txt: torch.nn.functional.cross_entropy
with label_smoothing and weight (mean reduction), the values cohort::CrossEntropyLoss
replicates (tests/loss/cross_entropy_options.cpp and tests/backend/device/losses.cpp read it).

    .venv/bin/python3 tests/reference/make_cross_entropy.py

One line per case, fields separated by `|`:
`name|label_smoothing|weights|labels|logits|loss64|grad64|loss32|grad32`. The logits (N x C,
row-major) and weights are float32 values; "none" means no weights. loss64/grad64 come from
torch in float64 on those values (the reference), loss32/grad32 from torch in float32 (how far
torch's own float computation is from it). Floats are repr()s of doubles: they read back exactly.
"""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
N, C = 7, 10

# (name, label_smoothing, weights or None, labels, logit seed, a large logit?)
CASES = [
    ("smoothing", 0.1, None, [3, 0, 9, 3, 5, 1, 7], 1, False),
    ("weights", 0.0, [1.0, 2.0, 0.5, 1.5, 3.0, 0.25, 1.0, 2.5, 0.75, 4.0], [3, 0, 9, 3, 5, 1, 7], 2, False),
    ("both", 0.2, [1.0, 2.0, 0.5, 1.5, 3.0, 0.25, 1.0, 2.5, 0.75, 4.0], [2, 2, 8, 4, 0, 6, 9], 3, True),
    # A class of weight 0 among the labels (it adds nothing to the denominator, but smoothing
    # still gives its sample a loss) and a stable large logit.
    ("zero_weight", 0.3, [0.0, 1.0, 1.0, 2.0, 0.5, 1.0, 0.0, 3.0, 1.0, 1.0], [0, 6, 3, 7, 0, 1, 4], 4, True),
    ("full_smoothing", 1.0, None, [1, 2, 3, 4, 5, 6, 7], 5, False),
]


def reference(x, labels, weights, eps, dtype):
    x = x.to(dtype).clone().requires_grad_(True)
    w = None if weights is None else weights.to(dtype)
    loss = torch.nn.functional.cross_entropy(x, labels, weight=w, label_smoothing=eps, reduction="mean")
    loss.backward()
    return float(loss.detach()), [float(v) for v in x.grad.flatten()]


def formula(x, labels, weights, eps):
    """The definition cohort implements, written out in float64 (checked against torch below):
    (1 - eps) * sum_n w[y_n] (-logp[n, y_n]) / W + (eps / C) * sum_n sum_c w[c] (-logp[n, c]) / W,
    W = sum_n w[y_n]; gradient (softmax * a_n - target_n) / W with a_n = (1 - eps) w[y_n] +
    (eps / C) sum_c w[c], target_n[c] = (1 - eps) w[y_n] [c == y_n] + (eps / C) w[c]."""
    x = x.to(torch.float64)
    n, c = x.shape
    w = torch.ones(c, dtype=torch.float64) if weights is None else weights.to(torch.float64)
    logp = torch.log_softmax(x, dim=1)
    wy = w[labels]
    total = wy.sum()
    picked = -(wy * logp[torch.arange(n), labels]).sum()
    smooth = -(logp * w).sum()
    loss = (1 - eps) * picked / total + (eps / c) * smooth / total
    a = (1 - eps) * wy + (eps / c) * w.sum()
    target = (eps / c) * w.expand(n, c).clone()
    target[torch.arange(n), labels] += (1 - eps) * wy
    grad = (torch.softmax(x, dim=1) * a[:, None] - target) / total
    return float(loss), [float(v) for v in grad.flatten()]


def floats(values):
    return " ".join(repr(float(v)) for v in values)


def main():
    lines = [f"# torch {torch.__version__}: tests/reference/make_cross_entropy.py"]
    for name, eps, weights, labels, seed, large in CASES:
        g = torch.Generator().manual_seed(seed)
        x = (torch.randn(N, C, generator=g) * 3).to(torch.float32)
        if large:
            x[1, 4] = 40.0  # exp overflows float without the max subtraction
        w = None if weights is None else torch.tensor(weights, dtype=torch.float32)
        y = torch.tensor(labels, dtype=torch.int64)
        l64, g64 = reference(x, y, w, eps, torch.float64)
        l32, g32 = reference(x, y, w, eps, torch.float32)
        lf, gf = formula(x, y, w, eps)
        assert abs(lf - l64) <= 1e-12 * abs(l64), (name, lf, l64)
        assert max(abs(a - b) for a, b in zip(gf, g64)) <= 1e-14, name
        wtext = "none" if w is None else floats(w.tolist())
        lines.append("|".join([name, repr(eps), wtext, " ".join(str(v) for v in labels), floats(x.flatten().tolist()),
                               repr(l64), floats(g64), repr(l32), floats(g32)]))
    out = os.path.join(HERE, "fixtures", "cross_entropy_options.txt")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
