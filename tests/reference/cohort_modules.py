"""PyTorch modules that match cohort's composite layers name for name, so a cohort state_dict
loads into them with load_state_dict(strict=True) and back (make_reference.py builds its fixtures
from them; torch_roundtrip.py sends weights both ways).

    Residual(body, shortcut=None)   cohort::Residual<Branch<...>, Identity | Branch<...>>:
                                    body(x) + shortcut(x); tensors "body.<i>.*", "shortcut.<i>.*"
"""
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
