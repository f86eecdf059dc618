"""utils.sharding (saved from chapter 14): ZeRO's memory arithmetic, and the arguments it
refuses. Chapter 14's ZeRO-1 worker is tested in tests/chapters/."""

import pytest

from utils.sharding import SHARDED, bytes_per_device


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
