"""utils.checks: the one check for counts, for learning rates, for counts on a command line,
for a chapter's knobs and for the C++ compiler torch.compile needs on a CPU."""

import argparse
import sys

import numpy as np
import pytest

from utils.checks import (
    check_cpp_compiler,
    check_int,
    check_knobs,
    check_positive,
    positive_int_argument,
)


@pytest.mark.parametrize("value", [1, 8, np.int64(3)])
def test_whole_numbers_pass_as_int(value):
    assert check_int("n", value) == int(value) and type(check_int("n", value)) is int


@pytest.mark.parametrize("value", [0, -1, 1.5, 2.0, True, "2", None])
def test_anything_else_is_named_in_the_message(value):
    with pytest.raises(
        ValueError, match=rf"^world_size must be an int of at least 1; got {value!r}\.$"
    ):
        check_int("world_size", value)


def test_the_lower_bound_can_be_zero_or_more():
    assert check_int("warmup", 0, least=0) == 0
    with pytest.raises(ValueError, match="at least 64"):
        check_int("gpu_memory_limit_mb", 32, least=64)


def test_a_positive_number_is_returned_as_a_float():
    assert check_positive("base_lr", 1) == 1.0 and type(check_positive("lr", 1)) is float
    for bad in (0, -0.1, "0.1", True, None):
        with pytest.raises(ValueError, match=rf"^lr must be a positive number; got {bad!r}\.$"):
            check_positive("lr", bad)


def test_a_command_line_count():
    assert positive_int_argument("3") == 3
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match=f"got {bad!r}"):
            positive_int_argument(bad)


def test_knobs_that_work_together_pass_and_others_say_what_to_do():
    check_knobs(64 <= 1024, "Keep EXAMPLES at least the batch.")
    with pytest.raises(ValueError, match=r"cannot work together\. Keep EXAMPLES at least"):
        check_knobs(4096 <= 1024, "Keep EXAMPLES at least the batch.")


def test_a_missing_cpp_compiler_says_what_to_install(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler++")
    with pytest.raises(RuntimeError, match="no-such-compiler\\+\\+, which is not on this"):
        check_cpp_compiler()
    monkeypatch.setenv("CXX", sys.executable)  # any program on the path will do
    assert check_cpp_compiler() == sys.executable
