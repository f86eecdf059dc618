"""Sharded data parallelism: what each device holds, and what it computes.

Written in chapter 14 (14_sharded_data_parallelism.ipynb), in its cells marked `# @save`:
edit them there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import torch
from torch import nn

from utils.checks import check_int
from utils.pytorch_ddp import make_model, step_batches

#: What each device keeps, from ZeRO's paper: mixed-precision Adam holds 16-bit weights
#: and gradients (2 bytes each per parameter) and, in float32, a master copy of the
#: weights and Adam's two moments (12 bytes).
MIXED_PRECISION_ADAM = {"weights": 2, "gradients": 2, "optimizer state": 12}

#: Which of the three kinds of state each stage splits over the devices.
SHARDED = {
    "replicated": (),
    "ZeRO-1": ("optimizer state",),
    "ZeRO-2": ("optimizer state", "gradients"),
    "ZeRO-3 / FSDP": ("optimizer state", "gradients", "weights"),
}


def bytes_per_device(
    parameters, devices, stage, bytes_per_parameter=MIXED_PRECISION_ADAM
):
    """The bytes of weights, gradients and optimizer state one device holds under
    `stage` (a key of SHARDED); activations and buffers come on top."""
    check_bytes_per_device_arguments(parameters, devices, stage)
    return {
        kind: parameters * size / (devices if kind in SHARDED[stage] else 1)
        for kind, size in bytes_per_parameter.items()
    }


# The argument checks of bytes_per_device: whole counts, and a stage SHARDED knows.


def check_bytes_per_device_arguments(parameters, devices, stage):
    """Raise a ValueError that names the argument of bytes_per_device that is wrong."""
    check_int("bytes_per_device: parameters", parameters)
    check_int("bytes_per_device: devices", devices)
    if stage not in SHARDED:
        raise ValueError(
            f"bytes_per_device: stage {stage!r} is not one of {', '.join(SHARDED)}."
        )


def batch_loss(model, data, indices, device):
    """The cross-entropy of `model` on the examples `indices` of `data`."""
    images, labels = data.tensors
    return nn.functional.cross_entropy(
        model(images[indices].to(device)), labels[indices].to(device)
    )


# The reference: one process, Adam in float64, on the same batches.


def train_adam_one_process(data, *, global_batch, steps, lr, seed):
    """One process, Adam, float64, on the batches of `step_batches`."""
    model = make_model(seed, torch.float64)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for batch in step_batches(len(data), global_batch, steps):
        optimizer.zero_grad()
        batch_loss(model, data, batch, "cpu").backward()
        optimizer.step()
    return model


def local_part(tensor):
    """The part of a (possibly sharded) tensor that lives on this process."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def optimizer_state_elements(optimizer):
    """The elements of the optimizer's per-weight tensors on this process."""
    return sum(
        local_part(value).numel()
        for state in optimizer.state.values()
        for value in state.values()
        if torch.is_tensor(value) and value.dim() > 0
    )
