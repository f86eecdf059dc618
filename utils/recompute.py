"""Recomputing activations: the bytes autograd saves, and the operations it runs.

Written in chapter 16 (16_layouts_and_recomputation.ipynb), in its cells marked `# @save`:
edit them there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode


def saved_activations_and_flops(blocks, x, *, recompute):
    """One forward and backward pass through `blocks` in sequence: the bytes of
    activations autograd saves (weights left out), the floating-point operations
    FlopCounterMode counts, and the gradients. With `recompute`, each block runs under
    `torch.utils.checkpoint`, which saves only its input and runs its forward again
    during the backward pass."""
    if not blocks:
        raise ValueError("saved_activations_and_flops: give at least one block.")
    weights = {w.data_ptr() for block in blocks for w in block.parameters()}
    saved = []

    def pack(tensor):  # called for every tensor autograd saves
        if tensor.data_ptr() not in weights:
            saved.append(tensor.numel() * tensor.element_size())
        return tensor

    for block in blocks:
        block.zero_grad()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with FlopCounterMode(display=False) as flops:
            h = x
            for block in blocks:
                h = checkpoint(block, h, use_reentrant=False) if recompute else block(h)
            h.square().mean().backward()
    gradients = [w.grad.clone() for block in blocks for w in block.parameters()]
    return sum(saved), flops.get_total_flops(), gradients
