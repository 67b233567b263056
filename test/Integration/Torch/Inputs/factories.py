"""Factories for `python -m ds_torch export` in the front-end tests."""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from parity_models import CNN, GPTBlock, lm_loss  # noqa: E402


def gpt():
    torch.manual_seed(0)
    m = GPTBlock(sdpa=True)
    batch = (torch.randint(0, 32, (4, 8)), torch.randint(0, 32, (4, 8)))
    return m, lm_loss, batch, torch.optim.AdamW(m.parameters(), lr=3e-3)


def cnn():
    torch.manual_seed(0)
    m = CNN()
    batch = (torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,)))
    return {"model": m, "loss_fn": F.cross_entropy, "example_batch": batch,
            "optimizer": torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)}


class Cumsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(torch.cumsum(x, dim=1))


def unsupported_op():
    return Cumsum(), F.cross_entropy, (torch.randn(8, 16), torch.randint(0, 4, (8,)))


def rmsprop():
    m = nn.Linear(16, 4)
    return (m, F.cross_entropy, (torch.randn(8, 16), torch.randint(0, 4, (8,))),
            torch.optim.RMSprop(m.parameters()))


def amsgrad():
    m = nn.Linear(16, 4)
    return (m, F.cross_entropy, (torch.randn(8, 16), torch.randint(0, 4, (8,))),
            torch.optim.Adam(m.parameters(), amsgrad=True))


def frozen():
    """A frozen first layer: its parameters become state, not trained."""
    m = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4))
    for p in m[0].parameters():
        p.requires_grad_(False)
    return (m, F.cross_entropy, (torch.randn(8, 16), torch.randint(0, 4, (8,))),
            torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1))


def not_a_tuple():
    return nn.Linear(2, 2)
