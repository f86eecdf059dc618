"""Argument checks shared by the helpers, so every bad count reads the same way."""

from __future__ import annotations

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
