"""Chapters 14 and 15: ZeRO's memory arithmetic (utils.sharding, saved from chapter 14), the
batches and the collectives the profiler records (utils.pytorch_ddp), and the chapters'
workers: ZeRO-1 by hand and FSDP2 (chapter 18's transformer) on 2 CPU processes == one
process, a sharded checkpoint saved on 2 processes and restored on 3."""

import json
from types import SimpleNamespace

import pytest
import torch

from tests.helpers import import_chapter_files
from utils import load_mnist_subset
from utils.launch import free_ports
from utils.pytorch_ddp import (
    collectives,
    rank_part,
    run_ranks,
    save_data,
    step_batches,
    to_tensors,
)
from utils.sharding import (
    SHARDED,
    bytes_per_device,
    train_adam_one_process,
)


def test_each_stage_splits_one_more_kind_of_state():
    totals = [sum(bytes_per_device(1000, 4, stage).values()) for stage in SHARDED]
    assert totals == [16_000, 4000 + 12_000 / 4, 2000 + 14_000 / 4, 16_000 / 4]
    assert bytes_per_device(1000, 1, "ZeRO-3 / FSDP") == bytes_per_device(1000, 1, "replicated")


@pytest.mark.parametrize(
    "parameters, devices, stage, message",
    [
        (1000, 4, "ZeRO-4", "is not one of replicated"),
        (1000, 0, "ZeRO-1", "devices"),
        (0, 2, "ZeRO-1", "parameters"),
    ],
)
def test_bad_arguments_to_the_arithmetic_are_refused(parameters, devices, stage, message):
    with pytest.raises(ValueError, match=message):
        bytes_per_device(parameters, devices, stage)


def test_batches_are_consecutive_and_split_equally():
    batches = step_batches(10, 4, 2)
    assert [b.tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert rank_part(batches[1], 1, 2).tolist() == [6, 7]
    with pytest.raises(ValueError, match="need 12 examples, and there are 10"):
        step_batches(10, 4, 3)
    with pytest.raises(ValueError, match="does not split into 3 equal parts"):
        rank_part(batches[0], 0, 3)


def test_collectives_are_read_with_the_size_of_the_whole_tensor():
    def event(name, *shapes):
        return SimpleNamespace(name=name, input_shapes=list(shapes))

    events = [
        event("c10d::_allgather_base_", [8], [4], []),
        event("gloo:all_gather", [4]),
        event("c10d::_reduce_scatter_base_", [4], [8], []),
        event("gloo:all_reduce", [8]),  # gloo's work inside the reduce-scatter
        event("c10d::allreduce_", [], []),
        event("gloo:all_reduce", [12]),
        event("c10d::allreduce_", [], []),  # gloo's thread starts it after the next one
        event("c10d::allreduce_", [], []),
        event("gloo:all_reduce", [5]),
        event("gloo:all_reduce", [3]),
    ]
    assert collectives(events) == [
        ("all-gather", 8),
        ("reduce-scatter", 8),
        ("all-reduce", 12),
        ("all-reduce", 5),
        ("all-reduce", 3),
    ]


def test_zero1_trains_as_one_process(tmp_path, monkeypatch):
    chapter14 = import_chapter_files(
        "chapters/14_sharded_data_parallelism.ipynb", tmp_path / "files", monkeypatch
    )
    (x, y), _ = load_mnist_subset()
    digits = to_tensors(x[:128], y[:128])
    digits = torch.utils.data.TensorDataset(digits.tensors[0].double(), digits.tensors[1])
    data_file = save_data(digits, tmp_path / "digits.pt")
    arguments = (data_file, str(tmp_path), 32, 2, 1e-3, 0)
    reference = list(
        train_adam_one_process(digits, global_batch=32, steps=2, lr=1e-3, seed=0)
        .state_dict()
        .values()
    )
    zero1 = chapter14("zero1")  # the processes import it from the working folder
    run_ranks(zero1.zero1_worker, 2, (2, free_ports(1)[0], *arguments), timeout_s=120)
    weights = torch.load(tmp_path / "zero1.pt").values()
    assert max((w - r).abs().max().item() for w, r in zip(weights, reference)) < 1e-12


def test_fsdp2_transformer_and_a_restore_on_another_world_size(tmp_path, monkeypatch):
    """Chapter 15's worker: chapter 18's transformer built on meta, sharded per block,
    clipped, on 2 processes == one process; its checkpoint restored on 3."""
    from recipes.pytorch.data import load_python_sources, sequences
    from recipes.pytorch.models import CharTransformer

    chapter15 = import_chapter_files(
        "chapters/15_fsdp2_and_sharded_checkpoints.ipynb", tmp_path / "files15", monkeypatch
    )
    fsdp, restore = chapter15("fsdp"), chapter15("restore")
    shape = {"context": 16, "width": 32, "layers": 2, "heads": 2}
    inputs, targets = sequences(load_python_sources(64 * 17), 16)
    text = torch.utils.data.TensorDataset(inputs[:64], targets[:64])
    data_file = save_data(text, tmp_path / "text.pt")
    run = {
        "name": "fsdp", "shape": shape, "seed": 0, "lr": 1e-3, "global_batch": 16,
        "steps": 2, "max_norm": 0.1, "reshard_after_forward": True, "prefetch": 1,
    }  # fmt: skip
    arguments = (2, free_ports(1)[0], data_file, str(tmp_path), run)
    run_ranks(fsdp.fsdp_worker, 2, arguments, timeout_s=120)
    saved = torch.load(tmp_path / "fsdp.pt")
    torch.manual_seed(0)  # on CPUs rank 0 builds the model from the seed, not per shard
    model = CharTransformer(**shape).double()
    fresh = model.state_dict()
    assert all(torch.equal(saved["start"][name], w) for name, w in fresh.items())
    assert not torch.equal(*saved["start"]["blocks.0.attention.qkv.weight"].chunk(2))
    model.load_state_dict(saved["start"])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    norms = []
    for batch in step_batches(64, 16, 2):
        fsdp.next_byte_loss(model, text, batch, "cpu").backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1).item())
        optimizer.step()
        optimizer.zero_grad()
    reference = list(model.state_dict().values())
    end = list(saved["end"].values())
    assert max((w - r).abs().max().item() for w, r in zip(end, reference)) < 1e-10
    held = json.loads((tmp_path / "fsdp_rank1.json").read_text())
    assert held["norms"] == pytest.approx(norms, rel=1e-12) and min(norms) > 0.1
    whole = sum(w.numel() for w in reference)
    assert held["weights"] < whole and held["gradients"] == held["weights"]
    assert held["optimizer state"] == 2 * held["weights"]  # Adam's two moments
    assert [kind for kind, _ in held["collectives"]].count("all-gather") == 1 + 2 * 2
    restoring = (3, free_ports(1)[0], str(tmp_path), run)
    run_ranks(restore.fsdp_restore_worker, 3, restoring, timeout_s=120)
    restored = torch.load(tmp_path / "restored3.pt").values()
    assert all(torch.equal(w, e) for w, e in zip(restored, end))
