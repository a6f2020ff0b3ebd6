"""What the torchvision reference checks (torchvision_resnet.py, torchvision_mobilenet.py) share:
differences relative to a tensor's largest value, the allowance a trained tensor is held to, and
BatchNorm statistics moved away from their defaults before an eval-mode comparison."""
import torch


def relative(a, b):
    """The largest |a - b| over the largest |b| (1 when b is all zeros)."""
    a, b = a.double(), b.double()
    scale = float(b.abs().max())
    return float((a - b).abs().max()) / (scale if scale > 0 else 1.0)


def excess(a, b, bound, absolute):
    """How far the worst element of `a` is from `b`, in units of the allowance bound * max|b| + absolute
    (<= 1 passes)."""
    a, b = a.double(), b.double()
    return float((a - b).abs().max()) / (bound * float(b.abs().max()) + absolute)


def worst_floating(ours, theirs, bound, absolute):
    """The floating-point tensor of `theirs` that comes nearest its allowance in `ours`: its name, its
    relative difference and its excess."""
    names = [k for k in theirs if theirs[k].dtype.is_floating_point]
    name = max(names, key=lambda k: excess(ours[k], theirs[k], bound, absolute))
    return name, relative(ours[name], theirs[name]), excess(ours[name], theirs[name], bound, absolute)


def counters_equal(ours, theirs):
    """Whether every integer tensor (num_batches_tracked) agrees."""
    return all(int(ours[k]) == int(theirs[k]) for k in theirs if not theirs[k].dtype.is_floating_point)


def with_statistics(m, shape):
    """`m` after two train-mode passes over random inputs of `shape`: BatchNorm statistics away from (0, 1)."""
    with torch.no_grad():
        m.train()
        for _ in range(2):
            m(torch.randn(*shape))
    return m
