#!/usr/bin/env python3
"""Writes the PyTorch reference fixtures the C++ parity tests compare against.

    python3 tests/reference/make_reference.py [--out DIR]

Every fixture is a .safetensors file: inputs, the upstream gradient, and PyTorch's forward
output, input gradient, parameter gradients and the parameters after 3 optimiser steps (for the
optimiser fixtures also the optimiser's state after each step).
Layers use fixed random inputs and parameters; models A-D use cohort's own initialisation
(mirrored in cohort_mirror.py) and, for model A, cohort's dropout masks. Runs on the CPU with
one thread so the numbers are reproducible; check_reference.py regenerates and compares.
"""
import argparse
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.numpy import save_file

import cohort_mirror as cm
from cohort_modules import Concat, Gated, Residual, basic_block, bottleneck, resnet20, unet_level

GENERATOR_VERSION = "1"


def t2n(t):
    return t.detach().cpu().contiguous().numpy().copy()


def save(out, name, tensors, meta):
    meta = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in meta.items()}
    meta["torch_version"] = torch.__version__
    meta["generator_version"] = GENERATOR_VERSION
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, os.path.join(out, name + ".safetensors"),
              metadata=meta)


def rng(seed):
    return np.random.default_rng(seed)


def randn(g, *shape, scale=1.0):
    return (g.standard_normal(shape) * scale).astype(np.float32)


# ----------------------------------------------------------------------------------------------
# Layers: forward, backward (loss = sum(y * dy)), and 3 SGD(momentum) steps on that loss.

def layer_case(out, name, module, x, seed, meta, train=True, steps=True, set_state=None):
    g = rng(seed)
    if set_state:
        set_state(module, g)
    module.zero_grad(set_to_none=True)  # a module reused from another case keeps no gradients
    module.train(train)
    tensors = {"x": x}
    for k, v in module.state_dict().items():
        tensors["p." + k] = t2n(v)
    xt = torch.from_numpy(x).requires_grad_(True)
    y = module(xt)
    dy = randn(g, *y.shape)
    y.backward(torch.from_numpy(dy))
    tensors.update({"y": t2n(y), "dy": dy, "dx": t2n(xt.grad)})
    for k, p in module.named_parameters():
        tensors["g." + k] = t2n(p.grad)
    for k, b in module.named_buffers():
        tensors["after." + k] = t2n(b)
    if steps and any(True for _ in module.parameters()):
        opt = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9, foreach=False)
        for s in range(3):
            opt.zero_grad()
            yy = module(torch.from_numpy(x))
            (yy * torch.from_numpy(dy)).sum().backward()
            opt.step()
            for k, p in module.named_parameters():
                tensors[f"step{s + 1}." + k] = t2n(p)
    save(out, name, tensors, meta)


def random_params(module, g):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(randn(g, *p.shape, scale=0.3)))


def random_bn(module, g):
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(1 + randn(g, *module.weight.shape, scale=0.2)))
        module.bias.copy_(torch.from_numpy(randn(g, *module.bias.shape, scale=0.2)))
        module.running_mean.copy_(torch.from_numpy(randn(g, *module.running_mean.shape, scale=0.3)))
        module.running_var.copy_(torch.from_numpy(0.5 + g.random(module.running_var.shape).astype(np.float32)))


class PhiloxDropout(nn.Module):
    """Dropout / Dropout2d with cohort's masks (see cohort_mirror.dropout_mask)."""

    def __init__(self, p, layer, channelwise, ctx):
        super().__init__()
        self.p, self.layer, self.channelwise, self.ctx = p, layer, channelwise, ctx

    def forward(self, x):
        if not self.training:
            return x
        n = x.shape[0]
        units_per_sample = x.shape[1] if self.channelwise else x[0].numel()
        m = cm.dropout_mask(self.p, self.ctx["seed"], self.layer, self.ctx["step"], 0, n * units_per_sample)
        shape = (n, x.shape[1]) + (1,) * (x.dim() - 2) if self.channelwise else x.shape
        return x * torch.from_numpy(m).reshape(shape)


def make_layers(out):
    g = rng(1)
    layer_case(out, "layer_conv2d_k3", nn.Conv2d(3, 5, 3), randn(g, 2, 3, 9, 8), 11,
               {"layer": "Conv2d<3,5,3,1,0>"}, set_state=random_params)
    layer_case(out, "layer_conv2d_k5s2p2", nn.Conv2d(2, 4, 5, stride=2, padding=2), randn(g, 3, 2, 11, 10), 12,
               {"layer": "Conv2d<2,4,5,2,2>"}, set_state=random_params)
    layer_case(out, "layer_conv2d_k1", nn.Conv2d(4, 6, 1), randn(g, 2, 4, 5, 5), 13,
               {"layer": "Conv2d<4,6,1,1,0>"}, set_state=random_params)
    layer_case(out, "layer_linear", nn.Linear(12, 7), randn(g, 5, 12), 14, {"layer": "Linear<12,7>"},
               set_state=random_params)
    layer_case(out, "layer_batch_norm2d_train", nn.BatchNorm2d(3), randn(g, 4, 3, 5, 6, scale=2.0) + 0.5, 15,
               {"layer": "BatchNorm2d<3>"}, set_state=random_bn, steps=False)
    layer_case(out, "layer_batch_norm2d_eval", nn.BatchNorm2d(3), randn(g, 4, 3, 5, 6, scale=2.0) + 0.5, 16,
               {"layer": "BatchNorm2d<3>"}, train=False, set_state=random_bn, steps=False)
    x = randn(g, 4, 3, 5, 5)
    x[0, 0, 0, :] = 0.0  # the gradient of ReLU at exactly 0 is 0
    layer_case(out, "layer_relu", nn.ReLU(), x, 17, {"layer": "ReLU"})
    layer_case(out, "layer_max_pool2d_k2", nn.MaxPool2d(2), randn(g, 2, 3, 9, 8), 18, {"layer": "MaxPool2d<2,2,0>"})
    layer_case(out, "layer_max_pool2d_k3s2p1", nn.MaxPool2d(3, 2, 1), randn(g, 2, 2, 9, 9), 19,
               {"layer": "MaxPool2d<3,2,1>"})
    ties = np.round(randn(g, 2, 2, 6, 6)).astype(np.float32)  # many equal values: first maximum wins
    layer_case(out, "layer_max_pool2d_ties", nn.MaxPool2d(2), ties, 20, {"layer": "MaxPool2d<2,2,0>"})
    x = randn(g, 5, 10, scale=3.0)
    x[0] += 80.0  # large magnitudes must not overflow
    x[1] -= 80.0
    layer_case(out, "layer_log_softmax", nn.LogSoftmax(dim=1), x, 21, {"layer": "LogSoftmax"})
    ctx = {"seed": 1234, "step": 3}
    layer_case(out, "layer_dropout", PhiloxDropout(0.25, 0, False, ctx), randn(g, 6, 10), 22,
               {"layer": "Dropout<0.25>", "seed": 1234, "step": 3, "index": 0})
    ctx2 = {"seed": 99, "step": 7}
    layer_case(out, "layer_dropout2d", PhiloxDropout(0.1, 0, True, ctx2), randn(g, 4, 5, 3, 3), 23,
               {"layer": "Dropout2d<0.1>", "seed": 99, "step": 7, "index": 0})
    make_resnet_layers(out)


def make_resnet_layers(out):
    """The layers residual networks add (issue 16), on a generator of their own so the cases above
    keep their inputs."""
    g = rng(5)
    # Conv2d(bias=False) on each CPU path: im2col (stride 2), the direct kernel's tiled and
    # one-channel weight gradients, and 1x1 kernels (ResNet's projection shortcut is 1x1 stride 2).
    for name, conv, x, seed in (
            ("layer_conv2d_nobias_k3s2p1", nn.Conv2d(3, 6, 3, stride=2, padding=1, bias=False), randn(g, 3, 3, 9, 8), 41),
            ("layer_conv2d_nobias_k1s2", nn.Conv2d(4, 8, 1, stride=2, bias=False), randn(g, 2, 4, 7, 6), 42),
            ("layer_conv2d_nobias_k3p1", nn.Conv2d(3, 5, 3, padding=1, bias=False), randn(g, 2, 3, 7, 6), 43),
            ("layer_conv2d_nobias_k1", nn.Conv2d(4, 6, 1, bias=False), randn(g, 2, 4, 5, 5), 44),
            ("layer_conv2d_nobias_1ch", nn.Conv2d(1, 4, 3, bias=False), randn(g, 3, 1, 8, 8), 45)):
        spelling = f"Conv2d<{conv.in_channels},{conv.out_channels},{conv.kernel_size[0]},{conv.stride[0]}," \
                   f"{conv.padding[0]},false>"
        layer_case(out, name, conv, x, seed, {"layer": spelling}, set_state=random_params)
    # AvgPool2d: odd sizes (floor mode drops the last row), padding counted in the divisor
    # (count_include_pad=True), overlapping windows.
    layer_case(out, "layer_avg_pool2d_k2", nn.AvgPool2d(2), randn(g, 2, 3, 9, 8), 46, {"layer": "AvgPool2d<2,2,0>"})
    layer_case(out, "layer_avg_pool2d_k3s2p1", nn.AvgPool2d(3, 2, 1), randn(g, 2, 2, 9, 9) + 1.0, 47,
               {"layer": "AvgPool2d<3,2,1>"})
    layer_case(out, "layer_avg_pool2d_k3s1p1", nn.AvgPool2d(3, 1, 1), randn(g, 2, 2, 6, 7) + 1.0, 48,
               {"layer": "AvgPool2d<3,1,1>"})
    layer_case(out, "layer_adaptive_avg_pool2d", nn.AdaptiveAvgPool2d(1), randn(g, 3, 4, 5, 6) + 0.5, 49,
               {"layer": "AdaptiveAvgPool2d<1>"})
    layer_case(out, "layer_adaptive_avg_pool2d_7x7", nn.AdaptiveAvgPool2d(1), randn(g, 2, 8, 7, 7), 50,
               {"layer": "AdaptiveAvgPool2d<1>"})
    # BatchNorm1d on (N, Features), random statistics; 150 features split between threads.
    layer_case(out, "layer_batch_norm1d_train", nn.BatchNorm1d(6), randn(g, 8, 6, scale=2.0) + 0.5, 51,
               {"layer": "BatchNorm1d<6>"}, set_state=random_bn)
    layer_case(out, "layer_batch_norm1d_eval", nn.BatchNorm1d(6), randn(g, 8, 6, scale=2.0) + 0.5, 52,
               {"layer": "BatchNorm1d<6>"}, train=False, set_state=random_bn)
    layer_case(out, "layer_batch_norm1d_wide", nn.BatchNorm1d(150), randn(g, 5, 150, scale=2.0) - 0.5, 53,
               {"layer": "BatchNorm1d<150>"}, set_state=random_bn)
    # Activations, with values near 0 and far out.
    x = randn(g, 4, 3, 5, 5, scale=3.0)
    x[0, 0, 0, :] = [0.0, 1e-6, -1e-6, 30.0, -30.0]
    x[0, 0, 1, :] = [100.0, -100.0, 88.0, -88.0, -90.0]
    layer_case(out, "layer_silu", nn.SiLU(), x, 54, {"layer": "SiLU"})
    layer_case(out, "layer_gelu", nn.GELU(), randn(g, 4, 3, 5, 5, scale=3.0), 55, {"layer": "GELU"})
    # (Tolerances are relative to a tensor's largest value: small and large inputs get fixtures
    # of their own.)
    near_zero = randn(g, 2, 16, scale=1e-3)
    near_zero[0, :4] = [0.0, 1e-8, -1e-8, 1e-6]
    layer_case(out, "layer_gelu_near_zero", nn.GELU(), near_zero, 56, {"layer": "GELU"})
    large = (g.uniform(3.0, 60.0, size=(2, 16)) * np.where(g.random((2, 16)) < 0.5, -1.0, 1.0)).astype(np.float32)
    layer_case(out, "layer_gelu_large", nn.GELU(), large, 59, {"layer": "GELU"})
    x = randn(g, 4, 3, 5, 5)
    x[0, 0, 0, :] = 0.0  # the gradient of LeakyReLU at exactly 0 is the slope (x > 0 is false)
    layer_case(out, "layer_leaky_relu", nn.LeakyReLU(), x, 57, {"layer": "LeakyReLU<0.01>"})
    layer_case(out, "layer_leaky_relu_0p2", nn.LeakyReLU(0.2), randn(g, 6, 10), 58, {"layer": "LeakyReLU<0.2>"})
    # The efficient networks' activations (issue 37): their kinks (0 and 6, -3 and 3, where torch's
    # gradients take a side of their own), values near 0 and far out. A generator of their own, so
    # the fixtures above keep their bytes.
    ga = rng(370)
    special = np.array([0.0, 6.0, -3.0, 3.0, 1e-6, -1e-6, 30.0, -30.0, 100.0, -100.0, 0.5, -0.5], dtype=np.float32)
    for name, module in [("relu6", nn.ReLU6()), ("hardsigmoid", nn.Hardsigmoid()), ("hardswish", nn.Hardswish()),
                         ("sigmoid", nn.Sigmoid()), ("tanh", nn.Tanh())]:
        x = randn(ga, 4, 3, 5, 5, scale=4.0)
        x.reshape(-1)[:special.size] = special
        layer_case(out, "layer_" + name, module, x, 371, {"layer": type(module).__name__})
    # Depthwise convolutions (issue 37): torch's Conv2d with groups = in = out channels, odd image
    # sizes, stride 2, padding wider than 1, with and without bias.
    gd = rng(372)
    for name, c, k, s, p, bias, shape in [("k3p1", 4, 3, 1, 1, True, (3, 4, 7, 6)),
                                          ("k3s2p1_nobias", 6, 3, 2, 1, False, (2, 6, 9, 8)),
                                          ("k5p2", 3, 5, 1, 2, True, (2, 3, 6, 7)),
                                          ("k3_nobias", 2, 3, 1, 0, False, (3, 2, 5, 5))]:
        layer_case(out, "layer_depthwise_" + name, nn.Conv2d(c, c, k, s, p, groups=c, bias=bias), randn(gd, *shape),
                   373, {"layer": f"DepthwiseConv2d<{c},{k},{s},{p}{'' if bias else ',false'}>"},
                   set_state=random_params)



def make_grouped(out):
    """Grouped convolutions (issue 37): torch's Conv2d with 1 < groups, a generator of their own so
    the other fixtures keep their bytes. Two groups and three (1x1, ShuffleNet's), stride 2 without
    bias, a channel multiplier (groups = in, out = 2 * in), the depthwise case spelled as Conv2d, and
    16-channel groups on which the dense kernels take their vectorised paths."""
    g = rng(374)
    for name, i, o, k, s, p, groups, bias, shape in [("g2_k3p1", 4, 6, 3, 1, 1, 2, True, (3, 4, 7, 6)),
                                                     ("g2_k3s2p1_nobias", 4, 8, 3, 2, 1, 2, False, (2, 4, 9, 8)),
                                                     ("g3_k1_nobias", 6, 9, 1, 1, 0, 3, False, (2, 6, 5, 5)),
                                                     ("g4_multiplier", 4, 8, 3, 1, 1, 4, True, (2, 4, 6, 6)),
                                                     ("g4_depthwise", 4, 4, 3, 2, 1, 4, True, (2, 4, 7, 7)),
                                                     ("g2_wide", 32, 32, 3, 1, 1, 2, False, (2, 32, 8, 8))]:
        layer_case(out, "layer_conv2d_" + name, nn.Conv2d(i, o, k, s, p, groups=groups, bias=bias), randn(g, *shape),
                   375, {"layer": f"Conv2d<{i},{o},{k},{s},{p},Groups{{{groups}}}{'' if bias else ',false'}>"},
                   set_state=random_params)

# ----------------------------------------------------------------------------------------------
# Residual blocks (cohort_modules.Residual): forward, backward and 3 SGD steps, as the layers.

def random_module(module, g):
    """Random parameters and running statistics for every layer inside `module`."""
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            random_bn(m, g)
        elif isinstance(m, (nn.Conv2d, nn.Linear)):
            random_params(m, g)


def make_blocks(out):
    g = rng(4)
    basic = Residual(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                   nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)))
    layer_case(out, "block_residual_identity", basic, randn(g, 3, 4, 6, 6), 31,
               {"layer": "Residual<Branch<Conv2d<4,4,3,1,1>,BatchNorm2d<4>,ReLU,Conv2d<4,4,3,1,1>,BatchNorm2d<4>>>"},
               set_state=random_module)
    projection = Residual(nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)),
                          nn.Sequential(nn.Conv2d(4, 8, 1, stride=2), nn.BatchNorm2d(8)))
    layer_case(out, "block_residual_projection", projection, randn(g, 3, 4, 7, 7), 32,
               {"layer": "Residual<Branch<Conv2d<4,8,3,2,1>,...>,Branch<Conv2d<4,8,1,2,0>,BatchNorm2d<8>>>"},
               set_state=random_module)
    layer_case(out, "block_residual_projection_eval", projection, randn(g, 3, 4, 7, 7), 33,
               {"layer": "the projection block in eval mode"}, train=False, set_state=random_module, steps=False)
    nested = Residual(nn.Sequential(Residual(nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.ReLU())),
                                    nn.Conv2d(3, 3, 1)))
    layer_case(out, "block_residual_nested", nested, randn(g, 2, 3, 5, 5), 34,
               {"layer": "Residual<Branch<Residual<Branch<Conv2d<3,3,3,1,1>,ReLU>>,Conv2d<3,3,1>>>"},
               set_state=random_module)
    # The blocks of cohort/models/resnet.hpp, as written there (no-bias convolutions).
    layer_case(out, "block_basic_projection", basic_block(4, 8, 2), randn(g, 3, 4, 7, 7), 35,
               {"layer": "models::BasicBlock<4,8,2>"}, set_state=random_module)
    layer_case(out, "block_bottleneck_identity", bottleneck(16, 4), randn(g, 3, 16, 5, 5), 36,
               {"layer": "models::Bottleneck<16,4,1>"}, set_state=random_module)
    layer_case(out, "block_bottleneck_projection", bottleneck(8, 4, 2), randn(g, 3, 8, 7, 6), 37,
               {"layer": "models::Bottleneck<8,4,2>"}, set_state=random_module)
    # Gated blocks (issue 37): squeeze-and-excitation as torchvision.ops.SqueezeExcitation, with
    # MobileNetV3's Hardsigmoid, and inside a residual body (an inverted residual with SE).
    g = rng(5)  # a generator of its own: the cases above keep their inputs
    se = Gated(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 3, 1), nn.ReLU(), nn.Conv2d(3, 8, 1), nn.Sigmoid()))
    layer_case(out, "block_gated_se", se, randn(g, 3, 8, 5, 6), 38,
               {"layer": "SqueezeExcitation<8,3>"}, set_state=random_module)
    se_v3 = Gated(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(6, 4, 1), nn.ReLU(), nn.Conv2d(4, 6, 1),
                                nn.Hardsigmoid()))
    layer_case(out, "block_gated_hardsigmoid", se_v3, randn(g, 4, 6, 7, 7), 39,
               {"layer": "SqueezeExcitation<6,4,ReLU,Hardsigmoid>"}, set_state=random_module)
    inverted = Residual(nn.Sequential(
        nn.Conv2d(4, 12, 1, bias=False), nn.BatchNorm2d(12), nn.Hardswish(),
        nn.Conv2d(12, 12, 3, 1, 1, groups=12, bias=False), nn.BatchNorm2d(12), nn.Hardswish(),
        Gated(nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(12, 4, 1), nn.ReLU(), nn.Conv2d(4, 12, 1),
                            nn.Hardsigmoid())),
        nn.Conv2d(12, 4, 1, bias=False), nn.BatchNorm2d(4)))
    layer_case(out, "block_inverted_residual_se", inverted, randn(g, 3, 4, 6, 6), 40,
               {"layer": "Residual<Branch<Conv2d<4,12,1,1,0,false>,...,SqueezeExcitation<12,4,ReLU,Hardsigmoid>,"
                         "Conv2d<12,4,1,1,0,false>,BatchNorm2d<4>>> (MobileNetV3's block)"}, set_state=random_module)


def make_dense(out):
    """Dense-prediction pieces (issue 38): Upsample's modes and Concat blocks, a U-Net level."""
    g = rng(6)
    for name, up, shape, seed in (
            ("upsample_nearest_2", nn.Upsample(scale_factor=2, mode="nearest"), (3, 2, 5, 4), 41),
            ("upsample_nearest_3", nn.Upsample(scale_factor=3, mode="nearest"), (2, 3, 3, 5), 42),
            ("upsample_bilinear_2", nn.Upsample(scale_factor=2, mode="bilinear"), (3, 2, 5, 4), 43),
            ("upsample_bilinear_3", nn.Upsample(scale_factor=3, mode="bilinear"), (2, 3, 4, 3), 44),
            ("upsample_bilinear_2_align", nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
             (3, 2, 5, 4), 45),
            ("upsample_bilinear_3_align", nn.Upsample(scale_factor=3, mode="bilinear", align_corners=True),
             (2, 3, 4, 3), 46),
            ("upsample_bilinear_2_single_row", nn.Upsample(scale_factor=2, mode="bilinear"), (2, 2, 1, 3), 47),
            ("upsample_bilinear_2_align_single_row",
             nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), (2, 2, 1, 3), 48)):
        layer_case(out, name, up, randn(g, *shape), seed, {"layer": repr(up)})
    both = Concat(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()),
                  nn.Sequential(nn.Conv2d(3, 2, 1, bias=False), nn.BatchNorm2d(2)))
    layer_case(out, "block_concat_branches", both, randn(g, 3, 3, 5, 6), 49,
               {"layer": "Concat<Branch<Conv2d<3,4,3,1,1>,ReLU>,Branch<Conv2d<3,2,1,1,0,false>,BatchNorm2d<2>>>"},
               set_state=random_module)
    skip = Concat(None, nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                                      nn.Upsample(scale_factor=2, mode="bilinear")))
    layer_case(out, "block_concat_unet_level", skip, randn(g, 3, 4, 6, 8), 50,
               {"layer": "Concat<Identity,Branch<MaxPool2d<2>,Conv2d<4,6,3,1,1>,BatchNorm2d<6>,ReLU,"
                         "Upsample<2,bilinear>>>"}, set_state=random_module)
    # Two levels: a Concat inside a Concat's branch (a 2-level U-Net's skips), first branch
    # identity-free on the outside.
    inner = Concat(None, nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                                       nn.Upsample(scale_factor=2)))
    nested = Concat(nn.Sequential(nn.Conv2d(2, 3, 1)),
                    nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), inner,
                                  nn.Conv2d(8, 3, 3, padding=1), nn.Upsample(scale_factor=2, mode="bilinear",
                                                                              align_corners=True)))
    layer_case(out, "block_concat_nested", nested, randn(g, 2, 2, 8, 8), 51,
               {"layer": "Concat<Branch<Conv2d<2,3,1>>,Branch<MaxPool2d<2>,...,Concat<Identity,...>,...>>"},
               set_state=random_module)
    # Per-pixel cross-entropy (torch.nn.CrossEntropyLoss on (N, C, H, W) and (N, H, W)): plain,
    # with ignored pixels, and with class weights and label smoothing together.
    g2 = rng(7)
    x = randn(g2, 2, 4, 3, 5, scale=2.0)
    labels = g2.integers(0, 4, size=(2, 3, 5)).astype(np.int32)
    ignored = labels.copy()
    ignored[0, 1, 2] = ignored[1, 0, :] = 255
    weights = np.array([0.5, 2.0, 1.0, 0.25], dtype=np.float32)
    for name, target, kwargs in (("loss_pixel_ce", labels, {}),
                                 ("loss_pixel_ce_ignore", ignored, dict(ignore_index=255)),
                                 ("loss_pixel_ce_weighted_smoothed", ignored,
                                  dict(ignore_index=255, weight=torch.from_numpy(weights), label_smoothing=0.2))):
        xt = torch.from_numpy(x).requires_grad_(True)
        loss = nn.CrossEntropyLoss(**kwargs)(xt, torch.from_numpy(target).long())
        loss.backward()
        save(out, name, {"x": x, "labels": target, "weights": weights,
                         "loss": np.array([loss.item()], dtype=np.float32), "dx": t2n(xt.grad)},
             {"loss": name, "options": repr({k: v for k, v in kwargs.items() if k != "weight"})})
    # Segmentation metrics: the confusion matrix of argmax(x) against the labels, ignored pixels
    # left out; IoU per class (-1 where a class is absent from both), its mean, pixel accuracy.
    pred = x.argmax(axis=1)
    keep = ignored != 255
    confusion = np.zeros((4, 4), dtype=np.int64)
    np.add.at(confusion, (ignored[keep], pred[keep]), 1)
    tp = np.diag(confusion).astype(np.float64)
    union = confusion.sum(0) + confusion.sum(1) - np.diag(confusion)
    iou = np.where(union > 0, tp / np.maximum(union, 1), -1.0)
    save(out, "metrics_segmentation", {"x": x, "labels": ignored, "confusion": confusion.astype(np.float32),
                                       "iou": iou.astype(np.float32),
                                       "mean_iou": np.array([iou[iou >= 0].mean()], dtype=np.float32),
                                       "pixel_accuracy": np.array([tp.sum() / keep.sum()], dtype=np.float32)},
         {"metrics": "segmentation, ignore_index 255"})
    # models::UNetLevel<4, 2>: two U-Net levels with their encoder and decoder convolutions.
    layer_case(out, "block_unet_level_c4_d2", unet_level(4, 2), randn(g, 2, 4, 8, 8), 52,
               {"layer": "models::UNetLevel<4,2>"}, set_state=random_module)
    # ConvTranspose2d: the U-Net's 2x2 stride-2 up-convolution, a 3x3 stride-2 one with
    # output_padding (odd sizes), stride 1 without bias, DCGAN's 4x4 stride-2, a 1x1 (the
    # pointwise path), stride 3 with output_padding 2, and padding at the kernel (the im2col path).
    g3 = rng(8)
    for name, ct, shape, seed in (
            ("conv_transpose_k2_s2", nn.ConvTranspose2d(4, 3, 2, stride=2), (2, 4, 3, 5), 53),
            ("conv_transpose_k3_s2_p1_op1", nn.ConvTranspose2d(3, 5, 3, 2, 1, output_padding=1), (2, 3, 4, 4), 54),
            ("conv_transpose_k3_s1_p1_nobias", nn.ConvTranspose2d(3, 4, 3, 1, 1, bias=False), (2, 3, 5, 6), 55),
            ("conv_transpose_k4_s2_p1", nn.ConvTranspose2d(2, 3, 4, 2, 1), (2, 2, 3, 3), 56),
            ("conv_transpose_k1", nn.ConvTranspose2d(5, 6, 1), (2, 5, 4, 4), 57),
            ("conv_transpose_k3_s3_op2", nn.ConvTranspose2d(2, 2, 3, 3, 0, output_padding=2), (2, 2, 3, 4), 58),
            ("conv_transpose_k2_s1_p2", nn.ConvTranspose2d(2, 3, 2, 1, 2), (2, 2, 6, 5), 59)):
        torch.manual_seed(seed)
        ct.reset_parameters()
        layer_case(out, name, ct, randn(g3, *shape), seed, {"layer": repr(ct)})
    # The dense losses (issue 38): regression (MSE, L1 with exact ties, SmoothL1, Huber), binary
    # cross-entropy on logits with a per-channel pos_weight, and cohort's documented soft Dice
    # (loss/dice_loss.hpp), written here in torch so that autograd checks its gradient.
    g4 = rng(9)
    x = randn(g4, 2, 3, 4, 5, scale=1.5)
    t = randn(g4, 2, 3, 4, 5)
    t.flat[::7] = x.flat[::7]  # d = 0: L1's and SmoothL1's gradient there is 0, as torch's sign
    for name, fn in (("loss_mse", nn.MSELoss()), ("loss_l1", nn.L1Loss()),
                     ("loss_smooth_l1", nn.SmoothL1Loss(beta=0.5)), ("loss_huber", nn.HuberLoss(delta=0.7))):
        xt = torch.from_numpy(x).requires_grad_(True)
        loss = fn(xt, torch.from_numpy(t))
        loss.backward()
        save(out, name, {"x": x, "t": t, "loss": np.array([loss.item()], dtype=np.float32), "dx": t2n(xt.grad)},
             {"loss": repr(fn)})
    logits = randn(g4, 2, 3, 4, 4, scale=3.0)
    logits[0, 0, 0, :2] = [40.0, -40.0]  # the stable form's far ends
    target = (g4.random((2, 3, 4, 4)) < 0.3).astype(np.float32)
    target[1, 2] = g4.random((4, 4)).astype(np.float32)  # soft labels in one plane
    pos_weight = np.array([3.0, 0.5, 1.0], dtype=np.float32)
    xt = torch.from_numpy(logits).requires_grad_(True)
    bce = nn.BCEWithLogitsLoss(pos_weight=torch.from_numpy(pos_weight).view(3, 1, 1))
    loss = bce(xt, torch.from_numpy(target))
    loss.backward()
    save(out, "loss_bce_logits", {"x": logits, "t": target, "pos_weight": pos_weight,
                                  "loss": np.array([loss.item()], dtype=np.float32), "dx": t2n(xt.grad)},
         {"loss": "BCEWithLogitsLoss(pos_weight of shape (3, 1, 1))"})
    scores = randn(g4, 2, 4, 3, 5, scale=2.0)
    labels = g4.integers(0, 4, size=(2, 3, 5)).astype(np.int32)
    labels[labels == 3] = 2  # class 3 has no pixel: its coefficient is the smoothed one
    labels[0, 1, 2] = labels[1, 2, :] = 255
    xt = torch.from_numpy(scores).requires_grad_(True)
    keep = torch.from_numpy(labels != 255)
    prob = torch.softmax(xt, dim=1) * keep.unsqueeze(1)
    onehot = F.one_hot(torch.from_numpy(np.where(labels == 255, 0, labels)).long(), 4).permute(0, 3, 1, 2)
    onehot = onehot.double() * keep.unsqueeze(1)
    smooth = 0.5
    dice = (2 * (prob * onehot).sum((0, 2, 3)) + smooth) / (prob.sum((0, 2, 3)) + onehot.sum((0, 2, 3)) + smooth)
    loss = 1 - dice.mean()
    loss.backward()
    save(out, "loss_dice", {"x": scores, "labels": labels, "loss": np.array([loss.item()], dtype=np.float32),
                            "dx": t2n(xt.grad)}, {"loss": "soft Dice, smooth 0.5, ignore_index 255"})
    # GroupNorm: 2 groups of 3 channels, one group (LayerNorm over C, H, W), one group per channel
    # (InstanceNorm with affine parameters), an offset input (mean 5: the two-pass variance) with a
    # larger eps; random affine parameters so that a swapped weight and bias shows.
    def random_affine(module, g):
        with torch.no_grad():
            module.weight.copy_(torch.from_numpy(1 + randn(g, *module.weight.shape, scale=0.3)))
            module.bias.copy_(torch.from_numpy(randn(g, *module.bias.shape, scale=0.3)))
    g5 = rng(10)
    for name, gn, shape, offset, seed in (
            ("group_norm_2x3", nn.GroupNorm(2, 6), (2, 6, 4, 5), 0.0, 60),
            ("group_norm_1x4", nn.GroupNorm(1, 4), (3, 4, 3, 3), 0.0, 61),
            ("group_norm_4x1", nn.GroupNorm(4, 4), (2, 4, 5, 3), 0.0, 62),
            ("group_norm_offset", nn.GroupNorm(2, 4, eps=1e-3), (2, 4, 6, 6), 5.0, 63)):
        layer_case(out, name, gn, randn(g5, *shape) + np.float32(offset), seed, {"layer": repr(gn)},
                   set_state=random_affine)
    # models::UNetLevel<8, 2, transposed, group>: the paper's U-Net levels (ConvTranspose2d
    # up-convolutions, GroupNorm(8, C) after every 3x3 convolution).
    g6 = rng(11)
    layer_case(out, "block_unet_level_c8_d2_transposed_group", unet_level(8, 2, "transposed", "group"),
               randn(g6, 2, 8, 8, 8), 64, {"layer": "models::UNetLevel<8,2,transposed,group>"},
               set_state=random_module)


# ----------------------------------------------------------------------------------------------
# Losses

def make_losses(out):
    g = rng(2)
    labels = g.integers(0, 10, size=6).astype(np.int32)
    logits = randn(g, 6, 10, scale=3.0)
    logits[2] += 60.0
    logp = F.log_softmax(torch.from_numpy(randn(g, 6, 10)), dim=1).numpy()
    for name, fn, x in (("loss_nll", F.nll_loss, logp), ("loss_cross_entropy", F.cross_entropy, logits)):
        xt = torch.from_numpy(x).requires_grad_(True)
        loss = fn(xt, torch.from_numpy(labels).long())
        loss.backward()
        save(out, name, {"x": x, "labels": labels, "loss": np.array([loss.item()], dtype=np.float32),
                         "dx": t2n(xt.grad)}, {"loss": name})


# ----------------------------------------------------------------------------------------------
# Optimisers: 3 steps from fixed parameters and gradients.

OPTIMIZERS = {
    "sgd_plain": (torch.optim.SGD, dict(lr=0.1)),
    "sgd_momentum": (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    "sgd_dampening_wd": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    # Dampening only scales the momentum buffer: without momentum PyTorch ignores it.
    "sgd_dampening_no_momentum": (torch.optim.SGD, dict(lr=0.1, dampening=0.5, weight_decay=0.01)),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.001)),
    "adam_default": (torch.optim.Adam, dict(lr=1e-3)),
    "adam_amsgrad_wd": (torch.optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-7, weight_decay=0.1, amsgrad=True)),
    "adadelta_default": (torch.optim.Adadelta, dict()),
    "adadelta_custom": (torch.optim.Adadelta, dict(lr=0.5, rho=0.95, eps=1e-5, weight_decay=0.05)),
    "adamw_default": (torch.optim.AdamW, dict()),
    "adamw_amsgrad": (torch.optim.AdamW, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-7, weight_decay=0.1, amsgrad=True)),
    "rmsprop_default": (torch.optim.RMSprop, dict()),
    "rmsprop_momentum_wd": (torch.optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.05, momentum=0.9)),
    "rmsprop_centered": (torch.optim.RMSprop, dict(lr=0.01, centered=True)),
    "rmsprop_centered_momentum": (torch.optim.RMSprop, dict(lr=0.005, alpha=0.95, momentum=0.8, centered=True,
                                                            weight_decay=0.01)),
}

# Parameter groups and gradient clipping: the 37 parameters as three tensors [0, 20), [20, 30),
# [30, 37); the middle one in a second group without weight decay and at lr_scale times the rate;
# clip_grad_norm_(max_norm) before every step (its returned norm saved as "normN").
GROUP_CASES = {
    "sgd_groups_clip": (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4), 0.5, 4.0),
    "adamw_groups_clip": (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.05), 2.0, 3.0),
    "rmsprop_groups_clip": (torch.optim.RMSprop, dict(lr=0.01, momentum=0.9, weight_decay=0.01), 0.25, 5.0),
}


def make_optimizers(out):
    """Parameters after each step ("p1".."p3") and the optimiser's state then: "state1.exp_avg",
    ... under the names of opt.state[p] (exp_avg, exp_avg_sq, max_exp_avg_sq, momentum_buffer,
    square_avg, acc_delta), its step count as "stateN.step" (int64). SGD without momentum keeps no
    buffer (PyTorch stores None)."""
    g = rng(3)
    p0 = randn(g, 37)
    grads = [randn(g, 37) for _ in range(3)]
    grads[1][:5] = 0.0  # zero gradients must be handled as PyTorch does
    for name, (cls, kw) in OPTIMIZERS.items():
        p = torch.nn.Parameter(torch.from_numpy(p0.copy()))
        opt = cls([p], foreach=False, **kw)
        tensors = {"p0": p0}
        for s in range(3):
            p.grad = torch.from_numpy(grads[s].copy())
            opt.step()
            tensors[f"g{s + 1}"] = grads[s]
            tensors[f"p{s + 1}"] = t2n(p)
            for key, value in opt.state[p].items():
                if value is None:
                    continue
                if key == "step":
                    tensors[f"state{s + 1}.step"] = np.array([int(value)], dtype=np.int64)
                else:
                    tensors[f"state{s + 1}.{key}"] = t2n(value)
        save(out, "optim_" + name, tensors, {"optimizer": cls.__name__, "options": kw})
    cuts = [0, 20, 30, 37]
    for name, (cls, kw, lr_scale, max_norm) in GROUP_CASES.items():
        ps = [torch.nn.Parameter(torch.from_numpy(p0[a:b].copy())) for a, b in zip(cuts, cuts[1:])]
        opt = cls([{"params": [ps[0], ps[2]]}, {"params": [ps[1]], "weight_decay": 0.0, "lr": kw["lr"] * lr_scale}],
                  foreach=False, **kw)
        tensors = {"p0": p0}
        for s in range(3):
            for p, a, b in zip(ps, cuts, cuts[1:]):
                p.grad = torch.from_numpy(grads[s][a:b].copy())
            norm = torch.nn.utils.clip_grad_norm_(ps, max_norm, foreach=False)
            opt.step()
            tensors[f"g{s + 1}"] = grads[s]
            tensors[f"norm{s + 1}"] = np.array([float(norm)], dtype=np.float64)
            tensors[f"clipped{s + 1}"] = np.concatenate([t2n(p.grad) for p in ps])
            tensors[f"p{s + 1}"] = np.concatenate([t2n(p) for p in ps])
        save(out, "optim_" + name, tensors, {"optimizer": cls.__name__, "options": kw, "lr_scale": lr_scale,
                                             "max_norm": max_norm, "cuts": cuts})


# ----------------------------------------------------------------------------------------------
# Models A-D, from cohort's initialisation.

def model_a(ctx):
    return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                         PhiloxDropout(0.10, 5, True, ctx), nn.Flatten(), nn.Linear(4608, 64), nn.ReLU(),
                         PhiloxDropout(0.25, 9, False, ctx), nn.Linear(64, 10), nn.LogSoftmax(dim=1))


def model_b(ctx):
    return nn.Sequential(nn.Conv2d(1, 16, 5, 1, 2), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Conv2d(16, 32, 5, 1, 2), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2, 2),
                         nn.Flatten(), nn.Linear(1568, 10))


def model_c(ctx):
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(6272, 64), nn.ReLU(), nn.Linear(64, 10))


def model_d(ctx):
    return nn.Sequential(nn.Conv2d(1, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(256, 512, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(4608, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


MODELS = {
    # name: (builder, loss, optimizer, options); the seeds' recipes, with B's lr raised so 3 steps move
    "A": (model_a, "nll", torch.optim.Adadelta, dict(lr=0.5)),
    "B": (model_b, "cross_entropy", torch.optim.SGD, dict(lr=0.01, momentum=0.9)),
    "C": (model_c, "cross_entropy", torch.optim.Adam, dict(lr=1e-3, eps=1e-7)),
    "D": (model_d, "cross_entropy", torch.optim.Adam, dict(lr=1e-3, eps=1e-7)),
}
LARGE = 50_000  # larger tensors are stored every 61st element to keep fixtures small
STRIDE = 61


def put(tensors, key, arr):
    arr = np.ascontiguousarray(arr)
    if arr.size > LARGE:
        tensors[key + f".every{STRIDE}"] = arr.reshape(-1)[::STRIDE].copy()
    else:
        tensors[key] = arr


def make_models(out, batch=8, seed=0):
    for name, (builder, loss_name, opt_cls, opt_kw) in MODELS.items():
        ctx = {"seed": seed, "step": 0}
        model = builder(ctx)
        cm.cohort_init(model, seed)
        model.train()
        g = rng(100 + ord(name))
        xs = [g.random((batch, 1, 28, 28), dtype=np.float32) * 2 - 0.5 for _ in range(3)]
        ys = [g.integers(0, 10, size=batch).astype(np.int32) for _ in range(3)]
        loss_fn = F.nll_loss if loss_name == "nll" else F.cross_entropy
        opt = opt_cls(model.parameters(), foreach=False, **opt_kw)
        tensors = {}
        for k, v in model.state_dict().items():
            tensors["init_head." + k] = t2n(v).reshape(-1)[:64].copy()
        for s in range(3):
            ctx["step"] = s
            tensors[f"x{s}"], tensors[f"labels{s}"] = xs[s], ys[s]
            xt = torch.from_numpy(xs[s]).requires_grad_(s == 0)
            opt.zero_grad()
            y = model(xt)
            loss = loss_fn(y, torch.from_numpy(ys[s]).long())
            loss.backward()
            tensors[f"loss{s}"] = np.array([loss.item()], dtype=np.float32)
            if s == 0:
                tensors["y0"] = t2n(y)
                tensors["dx0"] = t2n(xt.grad)
                for k, p in model.named_parameters():
                    put(tensors, "g0." + k, t2n(p.grad))
            opt.step()
        for k, v in model.state_dict().items():
            put(tensors, "after." + k, t2n(v))
        save(out, "model_" + name, tensors,
             {"model": name, "loss": loss_name, "optimizer": opt_cls.__name__, "options": opt_kw, "seed": seed,
              "batch": batch, "stride": STRIDE, "large": LARGE})


def make_resnet(out, batch=8, seed=0):
    """cohort::models::ResNet20 (cohort_modules.resnet20) from cohort's initialisation, 3 SGD steps
    (Nesterov momentum, weight decay) with BatchNorm in training mode, in float64: a deep ReLU
    network's float32 trajectories (any two implementations') part at the first pre-activation
    that rounds to the other side of zero (measured: one at 2.5e-8 of its layer's scale after
    one step decides 1e-3 of the next gradients), so the 3 steps are compared in double; the
    float path is compared on the first step (y0, dx0, g0). float32 inputs; tensors larger than
    4096 elements are kept every 7th element."""
    model = resnet20()
    cm.cohort_init(model, seed)  # float32 values, then exact in float64
    model.double().train()
    g = rng(200)
    xs = [g.random((batch, 1, 28, 28), dtype=np.float32) * 2 - 0.5 for _ in range(3)]
    ys = [g.integers(0, 10, size=batch).astype(np.int32) for _ in range(3)]
    opt_kw = dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    opt = torch.optim.SGD(model.parameters(), foreach=False, **opt_kw)
    tensors = {}

    def keep(key, arr):
        arr = np.ascontiguousarray(arr)
        if arr.size > 4096:
            tensors[key + ".every7"] = arr.reshape(-1)[::7].copy()
        else:
            tensors[key] = arr

    for k, v in model.state_dict().items():
        tensors["init_head." + k] = t2n(v).reshape(-1)[:64].copy()
    for s in range(3):
        tensors[f"x{s}"], tensors[f"labels{s}"] = xs[s], ys[s]
        xt = torch.from_numpy(xs[s]).double().requires_grad_(s == 0)
        opt.zero_grad()
        y = model(xt)
        loss = F.cross_entropy(y, torch.from_numpy(ys[s]).long())
        loss.backward()
        tensors[f"loss{s}"] = np.array([loss.item()], dtype=np.float64)
        if s == 0:
            tensors["y0"] = t2n(y)
            tensors["dx0"] = t2n(xt.grad)
            for k, p in model.named_parameters():
                keep("g0." + k, t2n(p.grad))
        opt.step()
    for k, v in model.state_dict().items():
        keep("after." + k, t2n(v))
    save(out, "model_resnet20", tensors, {"model": "resnet20", "loss": "cross_entropy", "optimizer": "SGD",
                                           "options": opt_kw, "seed": seed, "batch": batch, "dtype": "float64",
                                           "stride": 7, "large": 4096})


# ----------------------------------------------------------------------------------------------
# Weight averaging (optim/weight_average.hpp): torch's AveragedModel with get_ema_multi_avg_fn,
# use_buffers=True, on a small convolution + BatchNorm + Linear network's state_dict
# (parameters, running statistics, counters; the C++ test's Sequential has the same names).

def make_weight_average(out):
    """snap{k}.<name>: the model's state before update k; ema{k}.<name>: the average after it.
    decay 0.9 (lerp's small-weight branch) and 0.3 (its large-weight branch); 5 updates, the
    first of which copies. Tensor lengths 3, 5, 27 and 135 cover ATen's vector loop and its
    scalar tail."""
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
    for decay in (0.9, 0.3):
        g = rng(300 + int(decay * 10))
        model = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(27, 5))
        avg = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)
        tensors = {}
        for k in range(5):
            with torch.no_grad():
                for name, v in model.state_dict().items():
                    if v.dtype.is_floating_point:
                        scale = 1.0 + 3.0 * k if "running_var" not in name else 1.0
                        v.copy_(torch.from_numpy(randn(g, *v.shape, scale=scale)))
                        if "running_var" in name:
                            v.abs_().add_(0.1)
                    else:
                        v.fill_(int(g.integers(0, 1000)))
            avg.update_parameters(model)
            for name, v in model.state_dict().items():
                tensors[f"snap{k}.{name}"] = t2n(v)
            for name, v in avg.module.state_dict().items():
                tensors[f"ema{k}.{name}"] = t2n(v)
        save(out, f"weight_average_{int(decay * 10)}", tensors, {"decay": decay, "updates": 5})


# ----------------------------------------------------------------------------------------------
# Initialisations (network/init.hpp): torch.nn.init.dirac_, and airbench's whitening of a first
# convolution (get_patches, get_whitening_parameters, init_whitening_conv) in float64.

def make_init(out):
    tensors = {}
    for name, shape, groups in (("dirac_3x3", (6, 4, 3, 3), 1), ("dirac_groups", (6, 4, 3, 3), 2),
                                ("dirac_wide", (3, 5, 1, 2), 1)):
        w = torch.full(shape, 7.0)
        nn.init.dirac_(w, groups=groups)
        tensors[name] = t2n(w)
    g = rng(400)
    for name, (c, h, w_, k) in (("whiten_gray", (1, 10, 10, 2)), ("whiten_rgb", (3, 8, 9, 2)),
                                ("whiten_gray3", (1, 9, 8, 3))):
        x = torch.from_numpy(randn(g, 40, c, h, w_)) * 0.5 + 0.1
        patches = x.double().unfold(2, k, 1).unfold(3, k, 1).transpose(1, 3).reshape(-1, c, k, k)
        flat = patches.view(patches.shape[0], -1)
        cov = (flat.T @ flat) / flat.shape[0]
        values, vectors = torch.linalg.eigh(cov, UPLO="U")
        values = values.flip(0).view(-1, 1, 1, 1)
        vectors = vectors.T.reshape(c * k * k, c, k, k).flip(0)
        scaled = vectors / torch.sqrt(values + 5e-4)
        tensors[name + ".images"] = t2n(x)
        tensors[name + ".weight"] = t2n(torch.cat((scaled, -scaled)).float())
        tensors[name + ".eigenvalues"] = t2n(values.reshape(-1))
    save(out, "init", tensors, {"eps": 5e-4})


# ----------------------------------------------------------------------------------------------
# Recipe features (issue 36): Lookahead (optim/lookahead.hpp) and flip test-time augmentation
# (network/test_time_augmentation.hpp).

def make_recipe(out):
    """lookahead_<case>: Lookahead (the paper's Algorithm 1: slow weights start at the weights
    before the first step; after every k-th step slow.lerp_(fast, alpha), fast.copy_(slow)) around
    torch.optim.SGD / Adam over 7 steps: p<s> after step s, state<s>.<slot> the base optimiser's
    state and state<s>.lookahead_slow_buff the slow weights. alpha 0.5 and 0.8 take torch.lerp's
    two branches.
    tta: 0.5 * net(x) + 0.5 * net(x.flip(-1)) of a small eval-mode classifier (width 6, so a
    transposed axis would show), its cross-entropy and correct count; tta_dense: a per-pixel
    network's 0.5 * net(x) + 0.5 * net(x.flip(-1)).flip(-1)."""
    g = rng(36)
    p0 = randn(g, 37)
    grads = [randn(g, 37) for _ in range(7)]
    cases = {"sgd": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}, 3, 0.5),
             "adam": (torch.optim.Adam, {"lr": 0.01}, 2, 0.8)}
    for name, (cls, kw, k, alpha) in cases.items():
        p = torch.nn.Parameter(torch.from_numpy(p0.copy()))
        opt = cls([p], foreach=False, **kw)
        slow = p.detach().clone()
        tensors = {"p0": p0}
        for s in range(7):
            p.grad = torch.from_numpy(grads[s].copy())
            opt.step()
            if (s + 1) % k == 0:
                with torch.no_grad():
                    slow.lerp_(p.detach(), alpha)
                    p.copy_(slow)
            tensors[f"g{s + 1}"] = grads[s]
            tensors[f"p{s + 1}"] = t2n(p)
            tensors[f"state{s + 1}.lookahead_slow_buff"] = t2n(slow)
            for key, value in opt.state[p].items():
                if value is not None and key != "step":
                    tensors[f"state{s + 1}.{key}"] = t2n(value)
        save(out, "lookahead_" + name, tensors, {"optimizer": cls.__name__, "options": kw, "k": k, "alpha": alpha})

    g = rng(37)
    net = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 3 * 4, 4))
    random_params(net, g)
    random_bn(net[1], g)
    net.eval()
    x = torch.from_numpy(randn(g, 9, 1, 5, 6))
    labels = torch.from_numpy(g.integers(0, 4, 9).astype(np.int64))
    with torch.no_grad():
        plain = net(x)
        avg = 0.5 * net(x) + 0.5 * net(x.flip(-1))
    tensors = {"x": t2n(x), "labels": labels.numpy().astype(np.int32), "plain": t2n(plain), "averaged": t2n(avg),
               "loss": np.array([float(F.cross_entropy(avg, labels))], dtype=np.float64),
               "plain_loss": np.array([float(F.cross_entropy(plain, labels))], dtype=np.float64),
               "correct": np.array([int((avg.argmax(1) == labels).sum())], dtype=np.int64),
               "plain_correct": np.array([int((plain.argmax(1) == labels).sum())], dtype=np.int64)}
    for key, v in net.state_dict().items():
        tensors["p." + key] = t2n(v)
    save(out, "tta", tensors, {"rule": "0.5 * net(x) + 0.5 * net(x.flip(-1))"})

    dense = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Conv2d(2, 3, 1))
    random_params(dense, g)
    with torch.no_grad():
        avg = 0.5 * dense(x) + 0.5 * dense(x.flip(-1)).flip(-1)
    tensors = {"x": t2n(x), "averaged": t2n(avg)}
    for key, v in dense.state_dict().items():
        tensors["p." + key] = t2n(v)
    save(out, "tta_dense", tensors, {"rule": "0.5 * net(x) + 0.5 * net(x.flip(-1)).flip(-1)"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))
    ap.add_argument("--only", nargs="*", choices=["layers", "blocks", "losses", "optimizers", "models", "resnet",
                                                    "weight_average", "init", "grouped", "dense", "recipe"],
                    help="write only these groups of fixtures")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)
    makers = {"layers": make_layers, "blocks": make_blocks, "losses": make_losses, "optimizers": make_optimizers,
              "models": make_models, "resnet": make_resnet, "weight_average": make_weight_average,
              "init": make_init, "grouped": make_grouped, "dense": make_dense,
              "recipe": make_recipe}
    for key, make in makers.items():
        if not args.only or key in args.only:
            make(args.out)
    print(f"wrote fixtures to {args.out}")


if __name__ == "__main__":
    main()
