"""The models of the PyTorch parity tests, small enough to train 20
steps in a few seconds, each with a loss function and a batch generator.

Used by both import paths (ds_torch's make_fx front end and torch-mlir +
--ds-import-linalg), so that both are held to the same references.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=16, hidden=32, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.gelu(self.fc1(x)))))


class Attention(nn.Module):
    """Causal self-attention with explicit q/k/v projections; `sdpa` uses
    F.scaled_dot_product_attention instead of the explicit softmax."""

    def __init__(self, d, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.q_proj = nn.Linear(d, d)
        # No key bias: softmax is invariant to it, so its gradient is zero
        # up to rounding and its trajectory is pure noise to compare.
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads

        def split(y):
            return y.view(b, t, h, d // h).transpose(1, 2)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-2, -1)) / math.sqrt(d // h)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            s = s.masked_fill(mask, float("-inf"))
            a = F.softmax(s, dim=-1) @ v
        return self.out_proj(a.transpose(1, 2).reshape(b, t, d))


class GPTBlock(nn.Module):
    """Token + position embedding, one pre-norm decoder block (causal
    attention, GELU MLP), a final LayerNorm and a head tied to the token
    embedding."""

    def __init__(self, vocab=32, d=32, heads=2, seq=8, sdpa=False):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.02)
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, sdpa)
        self.ln2 = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        nn.init.normal_(self.tok.weight, std=0.02)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos
        x = x + self.attn(self.ln1(x))
        x = x + self.down(F.gelu(self.up(self.ln2(x))))
        return self.head(self.ln_f(x))


class CNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        # No conv biases: BatchNorm subtracts them again, so their gradient is
        # zero up to rounding (noise to compare, as for the key bias above).
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 2 * 2, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


class RMSNorm(nn.Module):
    """Written out as in LLaMA-style code, so that the export holds
    `x.pow(2)` and `rsqrt`, not a fused norm."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class RMSNormMLP(nn.Module):
    """A regression MLP whose hidden layer is RMS-normalised."""

    def __init__(self, d_in=16, hidden=32, d_out=4):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.norm = RMSNorm(hidden)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


class SnakeMLP(nn.Module):
    """Activations ds has no op for: Snake (x + sin^2(a x) / a, BigVGAN's,
    with a learned frequency a per channel), erf and cos. Both ways in keep
    them as linalg.generic ops that ds-autodiff differentiates from their
    scalar bodies."""

    def __init__(self, d_in=8, hidden=16, d_out=3):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.alpha = nn.Parameter(1.0 + 0.5 * torch.rand(hidden))
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        h = self.fc1(x)
        h = h + torch.sin(self.alpha * h).pow(2) / self.alpha
        return self.fc2(torch.erf(h) * torch.cos(h))


class SpecialMLP(nn.Module):
    """log1p, expm1, exp2, a fractional pow and SiLU: the torch-mlir import
    composes the first four of ds ops (with Kahan's corrections for log1p
    and expm1), the make-fx front end keeps them as linalg.generic ops."""

    def __init__(self, d_in=8, hidden=16, d_out=3):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        h = self.fc1(x)
        h = (torch.log1p(h * h) + torch.expm1(-h.abs()) + torch.exp2(0.5 * h)
             + (h * h + 0.1).pow(0.75) + F.silu(h))
        return self.fc2(h)


def squared_error(pred, target):
    return ((pred - target) ** 2).mean()


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# name -> (factory, loss function, batch maker(generator, dtype) -> tuple)
MODELS = {
    "mlp": (MLP, F.cross_entropy,
            lambda g, dt: (torch.randn(8, 16, generator=g, dtype=dt),
                           torch.randint(0, 10, (8,), generator=g))),
    "gpt": (GPTBlock, lm_loss,
            lambda g, dt: (torch.randint(0, 32, (4, 8), generator=g),
                           torch.randint(0, 32, (4, 8), generator=g))),
    "cnn": (CNN, F.cross_entropy,
            lambda g, dt: (torch.randn(4, 1, 8, 8, generator=g, dtype=dt),
                           torch.randint(0, 10, (4,), generator=g))),
    # Regression: the squared error written out (a pow) and F.mse_loss.
    "rmsnorm": (RMSNormMLP, squared_error,
                lambda g, dt: (torch.randn(8, 16, generator=g, dtype=dt),
                               torch.randn(8, 4, generator=g, dtype=dt))),
    "mse": (lambda: RMSNormMLP(d_in=8, hidden=16, d_out=3), F.mse_loss,
            lambda g, dt: (torch.randn(6, 8, generator=g, dtype=dt),
                           torch.randn(6, 3, generator=g, dtype=dt))),
    # Elementwise ops without a ds op (sin, cos, erf).
    "snake": (SnakeMLP, squared_error,
              lambda g, dt: (torch.randn(6, 8, generator=g, dtype=dt),
                             torch.randn(6, 3, generator=g, dtype=dt))),
    "special": (SpecialMLP, F.mse_loss,
                lambda g, dt: (torch.randn(6, 8, generator=g, dtype=dt),
                               torch.randn(6, 3, generator=g, dtype=dt))),
}

# Run only when named (--only): longer, and kept out of the GPU bundle.
# gpt_long's 288 tokens are a block of 256 rows and one of 32 for causal
# attention's GEMMs (ds-run's --causal-block, 256 by default): through the
# front end and ds-autodiff, each of the six runs over the lower block
# triangle only.
EXTRA_MODELS = {
    "gpt_long": (lambda: GPTBlock(vocab=32, d=16, heads=2, seq=288), lm_loss,
                 lambda g, dt: (torch.randint(0, 32, (2, 288), generator=g),
                                torch.randint(0, 32, (2, 288), generator=g))),
}

# Models the --joint path (PyTorch's backward through the ds_torch front
# end) cannot take yet, and why.
JOINT_UNSUPPORTED: dict[str, str] = {}
