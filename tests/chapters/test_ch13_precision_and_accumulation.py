"""Chapter 13's accumulating worker, the file its page writes: gradients accumulated under
`no_sync()` on 2 CPU processes equal one process with larger batches."""

import pytest
import torch
import torch.multiprocessing as mp

from tests.helpers import import_chapter_files, random_digits
from utils.ddp_reference import train_one_process
from utils.launch import free_ports


@pytest.mark.full  # starts Python programs: the full proof's
def test_chapter13_no_sync_accumulation_equals_one_process_with_larger_batches(
    tmp_path, monkeypatch
):
    """2 ranks x 2 micro-batches of 4, accumulated under no_sync() == 1 process, batches of
    16; the ninth micro-batch of a rank (an incomplete step) changes nothing."""
    chapter13 = import_chapter_files(
        "chapters/13_precision_and_accumulation.ipynb", tmp_path, monkeypatch
    )
    worker = chapter13("accumulate")
    data = random_digits(72, seed=1)
    args = (2, free_ports(1)[0], data, str(tmp_path), 4, 2, 0.1)
    mp.spawn(worker.accumulating_worker, args=args, nprocs=2, join=True)
    accumulated = torch.load(tmp_path / "rank0.pt")
    single = train_one_process(
        data, world_size=2, batch_per_device=8, epochs=1, lr=0.1, seed=0, dtype=torch.float64
    ).state_dict()
    assert all((accumulated[k] - single[k]).abs().max() < 1e-12 for k in single)
