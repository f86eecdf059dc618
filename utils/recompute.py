"""Recomputing activations: the bytes autograd saves, and the operations it runs.

Written in chapter 16 (16_layouts_and_recomputation.ipynb), in its cells marked `# @save`:
edit them there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode


def saved_activations_and_flops(blocks, x, *, recompute):
    """One forward and backward pass through `blocks` in sequence: the bytes of memory
    autograd saves for the backward pass (weights left out), the floating-point
    operations FlopCounterMode counts, and the gradients. With `recompute`, each block
    runs under `torch.utils.checkpoint`, which saves only its input and runs its forward
    again during the backward pass."""
    if not blocks:
        raise ValueError("saved_activations_and_flops: give at least one block.")
    weights = {w.untyped_storage().data_ptr() for b in blocks for w in b.parameters()}
    saved = {}  # memory block -> bytes: each once, however many views autograd saves

    def pack(tensor):  # called for every tensor autograd saves
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
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
    return sum(saved.values()), flops.get_total_flops(), gradients
