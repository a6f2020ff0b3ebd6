#!/usr/bin/env python3
"""torchvision's ResNet-18 and ResNet-34 in cohort, by torchvision's own state_dict names, against torchvision.

    python3 tests/reference/torchvision_resnet.py HELPER WORKDIR

HELPER is tests/tools/torchvision_resnet.cpp. torchvision.models.resnet18() is built with random
weights (seed 0; no weights can be downloaded here) and two train-mode passes over random images
so that its BatchNorm statistics are not the defaults, then saved with safetensors.

1. logits: cohort loads the file strictly through models::torchvision_names and computes the
   eval-mode logits of 4 random 3x224x224 images; they must agree with torchvision's. The same
   for torchvision.models.resnet34() (seed 1) and models::ResNet34<> (logits34).
2. train: 3 SGD steps (lr 0.001, momentum 0.9, weight decay 1e-4) of the whole network in train
   mode on the batch; cohort saves under torchvision's names, torchvision loads that file
   strictly, and every tensor (running statistics included) must agree with torch's own 3 steps.
3. finetune: the README's fine-tuning example, run by the helper as printed (a Trainer on
   ResNet18<10> with Freeze::below(22), the file loaded without its head, 3 epochs of the batch
   in memory, predict, save under torchvision's names, export ONNX). torch does the same from
   the head cohort starts with: fc replaced, the backbone frozen (requires_grad_(False) and
   eval()), 3 SGD steps. The backbone must come back bit for bit, torchvision must load the
   saved file strictly, the head and the predictions must agree with torch's, and ONNX Runtime
   must compute cohort's predictions from tuned.onnx.

Bounds (relative to the largest magnitude of each tensor; measured on this machine, see the
constants): cohort sums convolutions in other orders than oneDNN, so float rounding differs from
the first layer on. Eval logits agree to ~1e-6; three train-mode steps at batch 4 amplify the
rounding through BatchNorm's batch statistics to ~5e-4 (the losses still agree to ~1e-5).
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
from trained_comparison import counters_equal, relative, with_statistics, worst_floating  # noqa: E402

LOGIT_BOUND = 1e-5    # eval logits: measured 1.3e-6 of the largest
TRAIN_BOUND = 2e-3    # trained tensors: measured 4.9e-4 (conv1.weight after 3 whole-network steps)
TRAIN_ABS = 1e-5      # plus this much absolutely: BatchNorm biases start at 0 and stay near it (2e-5..2e-4
                      # after 3 steps); their gradients are sums over N*H*W with heavy cancellation, measured
                      # 4.5e-6 apart at most
LOSS_BOUND = 5e-5     # losses: measured 2e-6 relative on Sapphire Rapids, 9.4e-6 on Zen (the third step)
HEAD_BOUND = 1e-5     # the fine-tuned head (a frozen backbone: one layer trains): measured 2.7e-7


def logits_difference(helper, mode, m, weights, x, path):
    """cohort's eval logits of `x` (the helper's `mode` on the file `weights`) against `m`'s, relative."""
    out = path(mode + "_y.safetensors")
    subprocess.run([helper, mode, weights, path("x.safetensors"), out], check=True)
    m.eval()
    with torch.no_grad():
        y = m(x)
    return relative(load_file(out)["y"], y)


def sgd(params, lr):
    return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)


def main():
    helper, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    path = lambda name: os.path.join(work, name)
    torch.manual_seed(0)
    m = with_statistics(torchvision.models.resnet18(), (4, 3, 224, 224))
    start = {k: v.clone() for k, v in m.state_dict().items()}
    save_file({k: v.contiguous() for k, v in start.items()}, path("resnet18.safetensors"))
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((4, 3, 224, 224), dtype=np.float32))
    labels = torch.tensor([3, 1, 4, 1], dtype=torch.int64)
    save_file({"x": x}, path("x.safetensors"))
    save_file({"labels": labels}, path("labels.safetensors"))
    failed = 0

    # 1. eval logits
    d = logits_difference(helper, "logits", m, path("resnet18.safetensors"), x, path)
    print(f"logits: cohort vs torchvision, eval mode: worst difference {d:.3g} of the largest (bound {LOGIT_BOUND})")
    failed |= not d <= LOGIT_BOUND

    # 1b. eval logits of ResNet-34 (more blocks per stage: the name map's counting)
    torch.manual_seed(1)
    m34 = with_statistics(torchvision.models.resnet34(), (4, 3, 224, 224))
    save_file({k: v.contiguous() for k, v in m34.state_dict().items()}, path("resnet34.safetensors"))
    d = logits_difference(helper, "logits34", m34, path("resnet34.safetensors"), x, path)
    print(f"logits34: cohort vs torchvision's ResNet-34, eval mode: worst difference {d:.3g} of the largest "
          f"(bound {LOGIT_BOUND})")
    failed |= not d <= LOGIT_BOUND
    del m34

    # 2. three training steps of the whole network
    steps = 3
    subprocess.run([helper, "train", path("resnet18.safetensors"), path("x.safetensors"), path("labels.safetensors"),
                    str(steps), path("trained.safetensors")], check=True)
    m.load_state_dict(start)
    m.train()
    opt = sgd(m.parameters(), 0.001)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(m(x), labels)
        losses.append(float(loss.detach()))
        loss.backward()
        opt.step()
    ours = load_file(path("trained.safetensors"))
    back = torchvision.models.resnet18()
    back.load_state_dict(ours, strict=True)  # cohort's file, torchvision's names
    theirs = m.state_dict()
    name, d, e = worst_floating(ours, theirs, TRAIN_BOUND, TRAIN_ABS)
    counters = counters_equal(ours, theirs)
    cohort_losses = load_file(path("trained.safetensors.loss"))["loss"].tolist()
    dl = max(abs(c - t) / abs(t) for c, t in zip(cohort_losses, losses))
    print(f"train: {steps} SGD steps, losses cohort {['%.6f' % v for v in cohort_losses]} torch "
          f"{['%.6f' % v for v in losses]} (worst {dl:.3g} apart, bound {LOSS_BOUND}); the tensor nearest its bound: "
          f"{name}, {d:.3g} of its largest, {e:.2f} of the allowance ({TRAIN_BOUND} of the largest + {TRAIN_ABS}); "
          f"num_batches_tracked {'equal' if counters else 'DIFFERENT'}")
    failed |= not (e <= 1 and dl <= LOSS_BOUND and counters)

    # 3. fine-tune: the README's example, with the head cohort starts from
    subprocess.run([helper, "head-init", path("head.safetensors")], check=True)
    head = load_file(path("head.safetensors"))
    m.load_state_dict(start)
    m.fc = nn.Linear(512, 10)
    with torch.no_grad():
        m.fc.weight.copy_(head["fc.weight"])
        m.fc.bias.copy_(head["fc.bias"])
    for p in m.parameters():
        p.requires_grad_(False)
    for p in m.fc.parameters():
        p.requires_grad_(True)
    opt = sgd(m.fc.parameters(), 0.01)
    for _ in range(steps):  # cohort: 3 epochs of one batch (its order shuffled: float sums only)
        m.train()
        for name_, child in m.named_children():
            if name_ != "fc":
                child.eval()
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), labels).backward()
        opt.step()
    m.eval()
    with torch.no_grad():
        y = m(x)
    subprocess.run([helper, "finetune", path("x.safetensors"), path("labels.safetensors"), path("tuned_y.safetensors")],
                   check=True, cwd=work, stdout=subprocess.DEVNULL)
    ours = load_file(path("tuned.safetensors"))
    tuned = torchvision.models.resnet18(num_classes=10)
    tuned.load_state_dict(ours, strict=True)
    backbone_kept = all(torch.equal(ours[k], start[k]) for k in start if not k.startswith("fc."))
    dh = max(relative(ours[k], m.state_dict()[k]) for k in ("fc.weight", "fc.bias"))
    predicted = load_file(path("tuned_y.safetensors"))["y"]
    dy = relative(predicted, y)
    print(f"finetune: backbone {'bit for bit as loaded' if backbone_kept else 'CHANGED'}; head differs by {dh:.3g}, "
          f"predictions by {dy:.3g} of their largest (bounds {HEAD_BOUND}, {LOGIT_BOUND})")
    failed |= not (backbone_kept and dh <= HEAD_BOUND and dy <= LOGIT_BOUND)
    try:
        import onnxruntime
    except ImportError:
        print("finetune: onnxruntime missing, tuned.onnx not checked")
    else:
        session = onnxruntime.InferenceSession(path("tuned.onnx"), providers=["CPUExecutionProvider"])
        yo = torch.from_numpy(session.run(None, {session.get_inputs()[0].name: x.numpy()})[0])
        do = relative(yo, predicted)
        print(f"finetune: ONNX Runtime on tuned.onnx vs cohort's predictions: {do:.3g} of the largest (bound "
              f"{LOGIT_BOUND})")
        failed |= not do <= LOGIT_BOUND
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
