"""The second model of the PyTorch recipes (`--model transformer`): a small decoder-only
transformer that predicts the next character of Python source code, the text of the Python
standard library (on every machine: no download). Copy this file with torch_ddp.py and
data.py. Chapter 18 builds the same model, derives its operations per token and measures
its memory.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

#: Tokens are bytes; the standard library's sources are almost all ASCII, one byte a character.
VOCABULARY = 256


def load_python_sources(max_bytes: int) -> np.ndarray:
    """The first `max_bytes` bytes of the standard library's top-level modules (`*.py` in
    sorted order, one after another), as uint8 tokens."""
    folder = Path(sysconfig.get_path("stdlib"))
    chunks, size = [], 0
    for path in sorted(folder.glob("*.py")):
        chunks.append(path.read_bytes())
        size += len(chunks[-1])
        if size >= max_bytes:
            break
    return np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8)


def sequences(tokens: np.ndarray, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets from the text cut into pieces of `context` + 1 tokens, one after
    another: each target is the input moved one token on."""
    pieces = len(tokens) // (context + 1)
    if pieces < 2:
        raise SystemExit(
            f"a context of {context} tokens needs at least {2 * (context + 1)} bytes of "
            f"text; there are {len(tokens)}: lower --context or raise --limit-examples."
        )
    windows = torch.from_numpy(tokens[: pieces * (context + 1)].astype(np.int64))
    windows = windows.view(pieces, context + 1)
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


class CausalSelfAttention(nn.Module):
    """Each position attends to itself and the positions before it, in `heads` heads."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        qkv = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, length, width / heads)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # a fused kernel
        return self.out(y.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    """Attention, then a two-layer MLP four times as wide, each after a LayerNorm and
    added to its input."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.attention = nn.LayerNorm(width), CausalSelfAttention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class CharTransformer(nn.Module):
    """Token and position embeddings, `layers` blocks, a LayerNorm and the next token's
    logits."""

    def __init__(self, context: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCABULARY, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCABULARY, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tokens(tokens) + self.positions(positions)
        return self.head(self.norm(self.blocks(x)))
