"""The two models of the PyTorch recipes, their optimizers and their loss: the book's small
CNN on images (`--model cnn`, chapter 6) and a small decoder-only transformer that predicts
the next character of Python source code (`--model transformer`; chapter 18 builds the same
model, derives its operations per token and measures its memory)."""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.nn import functional as F

#: Tokens are bytes; the standard library's sources are almost all ASCII, one byte a character.
VOCABULARY = 256


class SmallCNN(nn.Module):
    """Two 3x3 convolutions with max pooling, then logits (the book's small CNN)."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(1, 16, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 5 * 5, classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.layers(images)


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


def build_model(args: argparse.Namespace, classes: int) -> nn.Module:
    """The CNN, or the transformer of --context, --width, --layers and --heads."""
    if args.model == "transformer":
        return CharTransformer(args.context, args.width, args.layers, args.heads)
    return SmallCNN(classes)


def build_optimizer(args: argparse.Namespace, model: nn.Module, lr: float):
    """SGD with momentum for the CNN; AdamW, transformers' usual choice, for the transformer."""
    if args.model == "transformer":
        return torch.optim.AdamW(model.parameters(), lr=lr)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def loss_of(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean"):
    """Cross-entropy, for one label per example or one per token."""
    return F.cross_entropy(logits.float().flatten(0, -2), targets.flatten(), reduction=reduction)
