"""Python mirror of cohort's random conventions (core/random.hpp, network/parameters.hpp).

cohort draws initial weights and dropout masks from Philox4x32-10 streams indexed by
(seed, stream, element). Re-implementing the same streams here lets the PyTorch reference
use *exactly* cohort's initial weights and dropout masks, so whole training steps can be
compared number for number.
"""
import math

import numpy as np

MASK32 = np.uint64(0xFFFFFFFF)
M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 on numpy arrays of 32-bit words held in uint64."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in (c0, c1, c2, c3))
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for r in range(10):
        if r:
            k0 = (k0 + W0) & MASK32
            k1 = (k1 + W1) & MASK32
        p0 = M0 * c0
        p1 = M1 * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0), (p1 & MASK32), ((p0 >> np.uint64(32)) ^ c3 ^ k1), (p0 & MASK32)
    return c0, c1, c2, c3


def stream_bits(seed, stream, first, count):
    """32-bit words first .. first+count-1 of a cohort RandomStream."""
    idx = np.arange(first, first + count, dtype=np.uint64)
    block = idx >> np.uint64(2)
    words = philox4x32_10(block & MASK32, block >> np.uint64(32), np.full_like(block, stream & 0xFFFFFFFF),
                          np.full_like(block, stream >> 32), seed & 0xFFFFFFFF, seed >> 32)
    stacked = np.stack(words, axis=-1)
    return stacked[np.arange(count), (idx & np.uint64(3)).astype(np.int64)]


def stream_uniform(seed, stream, first, count):
    """Uniform floats in [0, 1), as RandomStream::uniform."""
    return ((stream_bits(seed, stream, first, count) >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24))


def init_stream(ordinal):
    return (1 << 62) | ordinal


def dropout_stream(layer, step):
    return (2 << 62) | (layer << 40) | (step & ((1 << 40) - 1))


def cohort_order(model):
    """cohort's state_dict order for a torch.nn.Sequential (network/sequential.hpp's layout): layer
    by layer, each layer's parameters, then its running statistics, then its counters
    (num_batches_tracked), each group in PyTorch's own order inside the layer (a Residual block
    is one layer holding its branches' tensors). Yields (state_dict key, owning module, leaf)."""
    for layer, m in model.named_children():
        params = [k for k, _ in m.named_parameters()]
        buffers = [k for k, _ in m.named_buffers()]
        stats = [k for k in buffers if not k.endswith("num_batches_tracked")]
        counters = [k for k in buffers if k.endswith("num_batches_tracked")]
        for k in params + stats + counters:
            owner_path, _, leaf = k.rpartition(".")
            yield f"{layer}.{k}", (m.get_submodule(owner_path) if owner_path else m), leaf


def cohort_init(model, seed):
    """Overwrites a torch.nn.Sequential's state_dict with cohort's default initialisation: tensor
    j of cohort_order draws from init stream j."""
    import torch
    sd = model.state_dict()
    new = {}
    for ordinal, (name, m, leaf) in enumerate(cohort_order(model)):
        t = sd[name]
        if leaf == "num_batches_tracked":
            new[name] = torch.zeros_like(t)
        elif isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            new[name] = torch.ones_like(t) if leaf in ("weight", "running_var") else torch.zeros_like(t)
        else:  # Conv2d / Linear: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias
            w = m.weight
            fan_in = w.shape[1] * int(np.prod(w.shape[2:])) if w.dim() > 2 else w.shape[1]
            bound = 1.0 / math.sqrt(fan_in)
            u = stream_uniform(seed, init_stream(ordinal), 0, t.numel()).astype(np.float64)
            new[name] = torch.from_numpy(((2.0 * u - 1.0) * bound).astype(np.float32)).reshape(t.shape)
    assert len(new) == len(sd), "cohort_order must cover every tensor of the state_dict"
    model.load_state_dict(new)


def dropout_mask(p, seed, layer, step, first_unit, units):
    """The mask cohort's Dropout/Dropout2d uses: 0 or 1/(1-p) per unit (element or channel)."""
    u = stream_uniform(seed, dropout_stream(layer, step), first_unit, units)
    scale = np.float32(1) / (np.float32(1) - np.float32(p))
    return np.where(u >= np.float32(p), scale, np.float32(0)).astype(np.float32)
