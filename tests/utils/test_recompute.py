"""utils.recompute (saved from chapter 16): recomputing activations saves memory for more
operations, with the same gradients."""

import pytest
import torch
from torch import nn

from utils.recompute import saved_activations_and_flops


def test_recomputing_saves_activations_for_more_operations():
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8)) for _ in range(3)]
    x = torch.randn(4, 8)
    stored = saved_activations_and_flops(blocks, x, recompute=False)
    recomputed = saved_activations_and_flops(blocks, x, recompute=True)
    assert recomputed[0] < stored[0] and recomputed[1] > stored[1]
    assert all(torch.equal(a, b) for a, b in zip(stored[2], recomputed[2]))
    with pytest.raises(ValueError, match="at least one block"):
        saved_activations_and_flops([], x, recompute=True)


class _SavesAViewToo(nn.Module):
    """A layer, a softmax, and a product of the softmax with its own transpose: autograd
    saves the softmax's output twice, once through a view."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        p = torch.softmax(self.linear(x), dim=-1)
        return p @ p.T


def test_memory_saved_under_two_views_counts_once():
    x = torch.randn(4, 8)
    saved, _, _ = saved_activations_and_flops([_SavesAViewToo()], x, recompute=False)
    # the input (4 x 8), the softmax's output (4 x 8, saved as itself and as its
    # transpose), the output the loss squares (4 x 4): float32
    assert saved == (32 + 32 + 16) * 4
