"""Chapter 15's workers: FSDP2 on chapter 18's transformer, on 2 CPU processes == one process,
and its sharded checkpoint saved on 2 processes and restored on 3."""

import json

import pytest
import torch

from tests.helpers import import_chapter_files
from utils.launch import free_ports
from utils.pytorch_ddp import run_ranks, save_data, step_batches


@pytest.mark.full  # starts Python programs: the full proof's
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
