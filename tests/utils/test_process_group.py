"""utils.process_group (saved from chapter 13): processes meet at a TCP port of this machine,
on the CPU with gloo when there is no GPU for each."""

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from utils.launch import free_ports
from utils.process_group import join_process_group
from utils.pytorch_ddp import run_ranks


def sum_of_ranks(rank: int, world_size: int, port: int, out: str) -> None:
    """Join, all-reduce this rank's number, write the device and the sum."""
    device = join_process_group(rank, world_size, port)
    try:
        total = torch.tensor([float(rank + 1)], device=device)
        dist.all_reduce(total)
        report = {"device": str(device), "backend": dist.get_backend(), "sum": total.item()}
        (Path(out) / f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


@pytest.mark.full  # starts Python programs: the full proof's
def test_two_processes_join_at_a_port_and_all_reduce(tmp_path):
    run_ranks(sum_of_ranks, 2, (2, free_ports(1)[0], str(tmp_path)), timeout_s=60)
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    if torch.cuda.device_count() < 2:
        assert all(r["device"] == "cpu" and r["backend"] == "gloo" for r in reports)
    assert [r["sum"] for r in reports] == [3.0, 3.0]
