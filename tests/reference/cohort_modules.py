"""PyTorch modules that match cohort's composite layers name for name, so a cohort state_dict
loads into them with load_state_dict(strict=True) and back (make_reference.py builds its fixtures
from them; torch_roundtrip.py sends weights both ways).

    Residual(body, shortcut=None)   cohort::Residual<Branch<...>, Identity | Branch<...>>:
                                    body(x) + shortcut(x); tensors "body.<i>.*", "shortcut.<i>.*"
    Gated(gate)                     cohort::Gated<Branch<...>>: x * gate(x); tensors "gate.<i>.*"
    Concat(first, second)           cohort::Concat<Identity | Branch<...>, Identity | Branch<...>>:
                                    torch.cat([first(x), second(x)], 1); tensors "first.<i>.*",
                                    "second.<i>.*" (none for an identity, given as None)
"""
import math

import torch
import torch.nn as nn


class Residual(nn.Module):
    """body(x) + shortcut(x), with the identity when shortcut is None (no "shortcut" tensors)."""

    def __init__(self, body, shortcut=None):
        super().__init__()
        self.body = body
        if shortcut is not None:
            self.shortcut = shortcut
        else:
            self.shortcut = None

    def forward(self, x):
        return self.body(x) + (x if self.shortcut is None else self.shortcut(x))


class Gated(nn.Module):
    """x * gate(x), the gate's (N, C, 1, 1) output broadcast over H x W (cohort's layers/gated.hpp)."""

    def __init__(self, gate):
        super().__init__()
        self.gate = gate

    def forward(self, x):
        return x * self.gate(x)


class Concat(nn.Module):
    """torch.cat([first(x), second(x)], dim=1), a branch None for the identity (cohort's layers/concat.hpp)."""

    def __init__(self, first=None, second=None):
        super().__init__()
        self.first = first
        self.second = second

    def forward(self, x):
        a = x if self.first is None else self.first(x)
        b = x if self.second is None else self.second(x)
        return torch.cat([a, b], dim=1)


def basic_block(c_in, c_out, stride=1):
    """cohort::models::BasicBlock<c_in, c_out, stride> (a ReLU follows it in the network)."""
    body = nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
                         nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out))
    shortcut = None
    if stride != 1 or c_in != c_out:
        shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, 0, bias=False), nn.BatchNorm2d(c_out))
    return Residual(body, shortcut)


def bottleneck(c_in, width, stride=1):
    """cohort::models::Bottleneck<c_in, width, stride> (torchvision's v1.5 Bottleneck without its
    final ReLU): 1x1, 3x3 at the stride, 1x1 to 4 * width channels, each followed by BatchNorm."""
    c_out = 4 * width
    body = nn.Sequential(nn.Conv2d(c_in, width, 1, 1, 0, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                         nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                         nn.Conv2d(width, c_out, 1, 1, 0, bias=False), nn.BatchNorm2d(c_out))
    shortcut = None
    if stride != 1 or c_in != c_out:
        shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, 0, bias=False), nn.BatchNorm2d(c_out))
    return Residual(body, shortcut)


def resnet20(num_classes=10, in_channels=1):
    """cohort::models::ResNet20: its state_dict names and shapes, layer for layer."""
    layers = [nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    c = 16
    for width, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            layers += [basic_block(c, width, stride if i == 0 else 1), nn.ReLU()]
            c = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes)]
    return nn.Sequential(*layers)


def _conv_bn_relu(c_in, c_out):
    return [nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]


def fast_resnet(width=24, num_classes=10, in_channels=1, size=28):
    """cohort::models::FastResNetOf<in_channels, size, width, num_classes> (FastResNet: width 24,
    1x28x28): the time-to-accuracy record network, its state_dict names and shapes layer for layer."""
    def residual(c):
        return Residual(nn.Sequential(*_conv_bn_relu(c, c), *_conv_bn_relu(c, c)))

    w = width
    return nn.Sequential(*_conv_bn_relu(in_channels, w), nn.MaxPool2d(2),                 # 0..3
                         *_conv_bn_relu(w, 2 * w), residual(2 * w), nn.MaxPool2d(2),       # 4..8
                         *_conv_bn_relu(2 * w, 4 * w), residual(4 * w), nn.MaxPool2d(size // 4),  # 9..13
                         nn.Flatten(), nn.Linear(4 * w, num_classes))                      # 14..15


MOBILENET_V2_SMALL_SETTING = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 3, 2], [6, 96, 2, 1]]


def mobilenet_v2_small(channels=1, classes=10, dropout=0.2):
    """cohort::models::MobileNetV2Small<channels, S, classes> as a torchvision module: torchvision's
    MobileNetV2 class with the small variant's stage table, the stem at stride 1 and a 512-wide last
    convolution; the same module names as torchvision's mobilenet_v2 (so the same name map)."""
    import torchvision
    from torchvision.ops import Conv2dNormActivation
    m = torchvision.models.MobileNetV2(num_classes=classes, inverted_residual_setting=MOBILENET_V2_SMALL_SETTING,
                                       dropout=dropout)
    m.features[0][0] = nn.Conv2d(channels, 32, 3, 1, 1, bias=False)
    m.features[-1] = Conv2dNormActivation(96, 512, kernel_size=1, norm_layer=nn.BatchNorm2d,
                                          activation_layer=nn.ReLU6)
    m.classifier[1] = nn.Linear(512, classes)
    return m


def _unet_norm(c, norm):
    return nn.BatchNorm2d(c) if norm == "batch" else nn.GroupNorm(math.gcd(c, 8), c)


def _unet_double_conv(c_in, c_out, norm):
    return [nn.Conv2d(c_in, c_out, 3, 1, 1, bias=False), _unet_norm(c_out, norm), nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), _unet_norm(c_out, norm), nn.ReLU()]


def unet_level(c, depth, up="bilinear", norm="batch"):
    """cohort::models::UNetLevel<c, depth, up, norm>: Concat(identity, pool, 2 convs, [inner level, 2 convs],
    upsample); up "bilinear" or "transposed" (ConvTranspose2d(2c, 2c, 2, 2)), norm "batch" or "group"
    (GroupNorm(gcd(c, 8), c))."""
    layers = [nn.MaxPool2d(2)] + _unet_double_conv(c, 2 * c, norm)
    if depth > 1:
        layers += [unet_level(2 * c, depth - 1, up, norm)] + _unet_double_conv(6 * c, 2 * c, norm)
    layers.append(nn.Upsample(scale_factor=2, mode="bilinear") if up == "bilinear"
                  else nn.ConvTranspose2d(2 * c, 2 * c, 2, 2))
    return Concat(None, nn.Sequential(*layers))


def unet(in_channels, classes, width=16, depth=2, up="bilinear", norm="batch"):
    """cohort::models::UNet<Shape<in_channels, H, W>, classes, width, depth, up, norm>."""
    return nn.Sequential(*_unet_double_conv(in_channels, width, norm), unet_level(width, depth, up, norm),
                         *_unet_double_conv(3 * width, width, norm), nn.Conv2d(width, classes, 1))
