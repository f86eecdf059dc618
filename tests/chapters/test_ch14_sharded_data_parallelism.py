"""Chapter 14's ZeRO-1 worker, written by hand on its page: on 2 CPU processes it trains as
one process with Adam does (utils.sharding, saved from the chapter)."""

import pytest
import torch

from tests.helpers import import_chapter_files
from utils import load_mnist_subset
from utils.launch import free_ports
from utils.pytorch_ddp import run_ranks, save_data, to_tensors
from utils.sharding import train_adam_one_process


@pytest.mark.full  # starts Python programs: the full proof's
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
