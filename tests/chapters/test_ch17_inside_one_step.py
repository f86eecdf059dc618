"""Chapter 17's files: DDP's bucketing rule, the all-reduces by hand equal to DDP on 2 CPU
processes, and the timeline's intervals and overlap."""

import json

import pytest
import torch

from tests.helpers import import_chapter_files
from utils import load_mnist_subset
from utils.launch import free_ports
from utils.pytorch_ddp import run_ranks, save_data, to_tensors


@pytest.fixture
def chapter17(tmp_path_factory, monkeypatch):
    """Import a module that chapter 17 writes."""
    folder = tmp_path_factory.mktemp("chapter17")
    return import_chapter_files("chapters/17_inside_one_step.ipynb", folder, monkeypatch)


def test_buckets_fill_from_the_last_tensor(chapter17):
    make_buckets = chapter17("buckets").make_buckets
    assert make_buckets([144, 16, 4608, 32, 8000, 10], 8010) == [[5, 4], [3, 2, 1, 0]]
    assert make_buckets([1, 1, 1], 1) == [[2], [1], [0]]
    with pytest.raises(ValueError, match="tensor 4 has 8000 elements, more than a bucket"):
        make_buckets([144, 16, 4608, 32, 8000, 10], 5000)
    with pytest.raises(ValueError, match="capacity must be an int of at least 1"):
        make_buckets([1], 0)


def test_the_timeline_keeps_the_cpus_events(chapter17):
    """On a GPU the profiler records each `record_function` twice, on the CPU and on the
    GPU (seen on an H200: six "step" events for three steps); the timeline keeps one."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    def event(name, start, end, device=DeviceType.CPU):
        span = SimpleNamespace(start=start, elapsed_us=lambda: end - start)
        return SimpleNamespace(name=name, time_range=span, device_type=device)

    events = [
        event("step", 1000, 5000),
        event("step", 1200, 5200, DeviceType.CUDA),
        event("autograd::engine::evaluate_function: AddmmBackward0", 2000, 2500),
        event("nccl:all_reduce", 2400, 3000),
    ]
    timeline = chapter17("timeline").intervals(events)
    assert timeline == {
        "step": [[0.0, 4.0]],
        "backward": [[1.0, 0.5]],
        "all-reduce": [[1.4, 0.6]],
    }


def test_the_overlap_is_measured_from_the_first_steps_backward_end(chapter17):
    timeline = {
        "step": [[0.0, 10.0], [12.0, 10.0]],
        "backward": [[2.0, 3.0], [4.0, 4.0], [14.0, 5.0]],  # the first step's ends at 8
        "all-reduce": [[5.0, 1.0], [15.0, 1.0]],
    }
    assert chapter17("timeline").overlap_ms(timeline) == 3.0


@pytest.mark.full  # starts Python programs: the full proof's
def test_all_reduces_by_hand_equal_ddp(chapter17, tmp_path):
    by_hand = chapter17("all_reduce_by_hand")
    (x, y), _ = load_mnist_subset()
    digits = to_tensors(x[:64], y[:64])
    digits = torch.utils.data.TensorDataset(digits.tensors[0].double(), digits.tensors[1])
    data_file = save_data(digits, tmp_path / "digits.pt")
    arguments = (data_file, str(tmp_path), 32, 2, 0.05, 8010)
    run_ranks(by_hand.all_reduce_worker, 2, (2, free_ports(1)[0], *arguments), timeout_s=120)
    report = json.loads((tmp_path / "all_reduce.json").read_text())
    assert all(report[mode]["difference from DDP"] < 1e-12 for mode in by_hand.MODES)
    started = [e for e in report[by_hand.MODES[1]]["first step"] if e.startswith("all-")]
    assert started == ["all-reduce bucket 0 starts (8,010)", "all-reduce bucket 1 starts (4,800)"]
