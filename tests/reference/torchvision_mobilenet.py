#!/usr/bin/env python3
"""torchvision's MobileNetV2 in cohort, by torchvision's own state_dict names, against torchvision.

    python3 tests/reference/torchvision_mobilenet.py HELPER WORKDIR

HELPER is tests/tools/torchvision_mobilenet.cpp. The networks are built with random weights (no
weights can be downloaded here) and two train-mode passes over random images so that their
BatchNorm statistics are not the defaults, then saved with safetensors.

1. logits: torchvision.models.mobilenet_v2() (seed 0) loaded strictly by cohort's
   models::MobileNetV2<> through models::mobilenet_v2_names; eval-mode logits of 2 random
   3x224x224 images against torchvision's.
2. logits-small: models::MobileNetV2Small<> against its torchvision twin,
   cohort_modules.mobilenet_v2_small(): the torchvision class with the small variant's stage
   table, the stem at stride 1 on one channel and a 512-wide last convolution (the same module
   names, so the same name map).
3. train: 3 SGD steps (lr 0.01, momentum 0.9, weight decay 4e-5) of the small network in train mode
   (dropout 0 on both sides) on 8 random 1x28x28 images, in double precision on both sides;
   cohort saves under torchvision's names, torchvision loads that file strictly, and every tensor
   (running statistics and counters too) must agree with torch's own 3 steps. Why double: float
   trajectories part within 3 steps (a BatchNorm bias of the first block: torch's own float run
   lands 25% of the tensor's largest away from its double run, cohort's float run as far), so a
   float comparison measures the chaos, not the kernels.
4. onnx: the small network exported by cohort; ONNX Runtime must compute cohort's logits (depthwise
   Conv with `group`, Clip for ReLU6, Add for the shortcuts, GlobalAveragePool).
5. se: a network with squeeze-and-excitation blocks (cohort's Gated: Hardsigmoid inside an
   inverted residual with Hardswish, Sigmoid on the main path) exported by cohort; ONNX Runtime
   must compute cohort's eval output (Mul broadcasting the (N, C, 1, 1) gate, HardSwish,
   HardSigmoid).

Bounds (relative to the largest magnitude of each tensor; measured on this machine, see the
constants): float sums run in other orders than oneDNN's.
Exit 77 (ctest: skipped) when torch, torchvision or safetensors is missing.
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torchvision
    from safetensors.torch import load_file, save_file
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cohort_modules import mobilenet_v2_small  # noqa: E402
from trained_comparison import counters_equal, relative, with_statistics, worst_floating  # noqa: E402

LOGIT_BOUND = 1e-5    # eval logits: measured 5.7e-7 (mobilenet_v2), 7.8e-7 (small), ONNX Runtime 7.3e-8-7.8e-7
# In double the two sides still differ from the first forward on: cohort's BatchNorm eps is the
# float 1e-5f (9.99999975e-6), torch's the double 1e-5; 3 steps amplify that.
TRAIN_BOUND = 1e-7    # trained tensors in double, relative to each tensor's largest: measured 7.7e-9
TRAIN_ABS = 1e-12     # plus this much absolutely (BatchNorm biases start at 0)
LOSS_BOUND = 1e-9     # losses in double, relative: measured 6.5e-12 (first step) to 3.1e-11 (third)


def small(dropout=0.2):
    """models::MobileNetV2Small<> (1x28x28, 10 classes) as a torchvision module."""
    return mobilenet_v2_small(dropout=dropout)


def logits_difference(helper, mode, m, weights, x, path):
    save_file({"x": x}, path(mode + "_x.safetensors"))
    out = path(mode + "_y.safetensors")
    subprocess.run([helper, mode, weights, path(mode + "_x.safetensors"), out], check=True)
    m.eval()
    with torch.no_grad():
        y = m(x)
    return relative(load_file(out)["y"], y), load_file(out)["y"]


def main():
    helper, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    path = lambda name: os.path.join(work, name)
    rng = np.random.default_rng(1)
    failed = 0

    # 1. torchvision's MobileNetV2, eval logits
    torch.manual_seed(0)
    m = with_statistics(torchvision.models.mobilenet_v2(), (4, 3, 224, 224))
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, path("mobilenet_v2.safetensors"))
    x = torch.from_numpy(rng.standard_normal((2, 3, 224, 224), dtype=np.float32))
    d, _ = logits_difference(helper, "logits", m, path("mobilenet_v2.safetensors"), x, path)
    print(f"logits: cohort vs torchvision's mobilenet_v2, eval mode: worst difference {d:.3g} of the largest "
          f"(bound {LOGIT_BOUND})")
    failed |= not d <= LOGIT_BOUND
    del m

    # 2. the small variant, eval logits
    torch.manual_seed(1)
    s = with_statistics(small(), (16, 1, 28, 28))
    start = {k: v.clone() for k, v in s.state_dict().items()}
    save_file({k: v.contiguous() for k, v in start.items()}, path("small.safetensors"))
    save_file({k: (v.double() if v.dtype.is_floating_point else v).contiguous() for k, v in start.items()},
              path("small_f64.safetensors"))
    xs = torch.from_numpy(rng.standard_normal((8, 1, 28, 28), dtype=np.float32))
    d, ys = logits_difference(helper, "logits-small", s, path("small.safetensors"), xs, path)
    print(f"logits-small: cohort's MobileNetV2Small vs its torchvision twin, eval mode: worst difference {d:.3g} of "
          f"the largest (bound {LOGIT_BOUND})")
    failed |= not d <= LOGIT_BOUND

    # 3. three training steps of the small network
    steps = 3
    labels = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6], dtype=torch.int64)
    save_file({"labels": labels}, path("labels.safetensors"))
    subprocess.run([helper, "train", path("small_f64.safetensors"), path("logits-small_x.safetensors"),
                    path("labels.safetensors"), str(steps), path("trained.safetensors")], check=True)
    t = small(dropout=0.0).double()
    t.load_state_dict(start)
    t.train()
    opt = torch.optim.SGD(t.parameters(), lr=0.01, momentum=0.9, weight_decay=4e-5)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(t(xs.double()), labels)
        losses.append(float(loss.detach()))
        loss.backward()
        opt.step()
    ours = load_file(path("trained.safetensors"))
    back = small().double()
    back.load_state_dict(ours, strict=True)  # cohort's file, torchvision's names
    theirs = t.state_dict()
    name, d, e = worst_floating(ours, theirs, TRAIN_BOUND, TRAIN_ABS)
    counters = counters_equal(ours, theirs)
    cohort_losses = load_file(path("trained.safetensors.loss"))["loss"].tolist()
    dl = max(abs(c - l) / abs(l) for c, l in zip(cohort_losses, losses))
    print(f"train: {steps} SGD steps in double, losses cohort {['%.12f' % v for v in cohort_losses]} torch "
          f"{['%.12f' % v for v in losses]} (worst {dl:.3g} apart, bound {LOSS_BOUND}); the tensor nearest its bound: "
          f"{name}, {d:.3g} of its largest, {e:.2f} of the allowance "
          f"({TRAIN_BOUND} of the largest + {TRAIN_ABS}); num_batches_tracked {'equal' if counters else 'DIFFERENT'}")
    failed |= not (e <= 1 and dl <= LOSS_BOUND and counters)

    # 4. ONNX export of the small network
    try:
        import onnxruntime
    except ImportError:
        print("onnx: onnxruntime missing, not checked")
    else:
        subprocess.run([helper, "onnx", path("small.safetensors"), path("small.onnx")], check=True)
        session = onnxruntime.InferenceSession(path("small.onnx"), providers=["CPUExecutionProvider"])
        yo = torch.from_numpy(session.run(None, {session.get_inputs()[0].name: xs.numpy()})[0])
        do = relative(yo, ys)
        print(f"onnx: ONNX Runtime on cohort's small.onnx vs cohort's logits: {do:.3g} of the largest "
              f"(bound {LOGIT_BOUND})")
        failed |= not do <= LOGIT_BOUND

        # 5. squeeze-and-excitation blocks through ONNX
        xe = rng.standard_normal((4, 8, 10, 10), dtype=np.float32)
        save_file({"x": torch.from_numpy(xe)}, path("se_x.safetensors"))
        subprocess.run([helper, "se", path("se_x.safetensors"), path("se_y.safetensors")], check=True)
        ye = load_file(path("se_y.safetensors"))["y"]
        session = onnxruntime.InferenceSession(path("se_y.safetensors.onnx"), providers=["CPUExecutionProvider"])
        try:
            import onnx
            ops = sorted({n.op_type for n in onnx.load(path("se_y.safetensors.onnx")).graph.node})
        except ImportError:
            ops = "(onnx not installed)"
        yo = torch.from_numpy(session.run(None, {session.get_inputs()[0].name: xe})[0])
        de = relative(yo, ye)
        print(f"se: ONNX Runtime on cohort's squeeze-and-excitation network vs cohort's output: {de:.3g} of the "
              f"largest (bound {LOGIT_BOUND}); operators {ops}")
        failed |= not de <= LOGIT_BOUND
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
