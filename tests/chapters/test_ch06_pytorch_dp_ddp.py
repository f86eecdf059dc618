"""Chapter 6's DDP worker, the file its page writes: on 2 CPU processes over gloo it trains
exactly as one process does (utils.ddp_reference)."""

import json

import pytest
import torch
import torch.multiprocessing as mp

from tests.helpers import import_chapter_files, random_digits
from utils.ddp_reference import train_one_process


@pytest.mark.full  # starts Python programs: the full proof's
def test_chapter6_ddp_worker_on_two_cpu_processes_equals_one_process(tmp_path, monkeypatch):
    chapter6 = import_chapter_files("chapters/06_pytorch_dp_ddp.ipynb", tmp_path, monkeypatch)
    worker = chapter6("ddp_worker")
    data, out = random_digits(96, seed=0), tmp_path / "run"
    out.mkdir()
    args = (2, data, str(out), 2, 8, 0.1, 0, "float64")
    mp.spawn(worker.ddp_worker, args=args, nprocs=2, join=True)
    ranks = [torch.load(out / f"rank{r}.pt") for r in range(2)]
    single = train_one_process(
        data, world_size=2, batch_per_device=8, epochs=2, lr=0.1, seed=0, dtype=torch.float64
    ).state_dict()
    for name in single:
        assert torch.equal(ranks[0][name], ranks[1][name]), name  # bit-identical ranks
        assert (ranks[0][name] - single[name]).abs().max() < 1e-12, name
    report = json.loads((out / "rank0.json").read_text())
    assert report["steps_per_epoch"] == 6 and len(report["epoch_seconds"]) == 2
    assert (report["device"], report["backend"]) == ("cpu", "gloo")  # no GPU here
