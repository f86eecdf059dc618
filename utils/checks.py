"""Argument checks shared by the helpers, so every bad argument reads the same way."""

from __future__ import annotations

import argparse
import numbers


def check_int(name: str, value: object, least: int = 1) -> int:
    """Return `value` as an int if it is a whole number (not a bool) of at least `least`.

    Otherwise raise a ValueError that names the argument, e.g. "world_size must be an int
    of at least 1; got 0." Used wherever a reader passes a count (devices, ranks, batches).
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < least
    ):
        raise ValueError(f"{name} must be an int of at least {least}; got {value!r}.")
    return int(value)


def check_positive(name: str, value: object) -> float:
    """Return `value` as a float if it is a real number above zero (a learning rate), else
    raise a ValueError that names the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value <= 0:
        raise ValueError(f"{name} must be a positive number; got {value!r}.")
    return float(value)


def positive_int_argument(text: str) -> int:
    """An argparse `type=` for counts given on a command line (`--devices 2`)."""
    try:
        return check_int("the value", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer, got {text!r}"
        ) from None


def check_knobs(ok: bool, what_to_do: str) -> None:
    """Stop a chapter at its first cell when its knobs cannot work together (a batch larger
    than the data, too few epochs for a section), with `what_to_do`, rather than later with
    an error about something else."""
    if not ok:
        raise ValueError(f"These knob values cannot work together. {what_to_do}")


def check_cpp_compiler() -> str:
    """The C++ compiler torch.compile's inductor builds CPU kernels with (`$CXX`, else g++;
    clang++ on macOS: torch/_inductor/config.py), or a RuntimeError saying what to do."""
    import os
    import shutil
    import sys

    name = os.environ.get("CXX") or ("clang++" if sys.platform == "darwin" else "g++")
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(
            f"torch.compile on a CPU builds C++ kernels with {name}, which is not on this "
            "machine: install a C++ compiler (Debian and Ubuntu: apt-get install g++; "
            "macOS: xcode-select --install) or point CXX at one, then run the cell again."
        )
    return found
