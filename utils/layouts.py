"""Keras 3 `LayoutMap` checks (chapter 16): a key that matches no variable shards nothing,
silently."""

from __future__ import annotations

from collections.abc import Iterable


def unmatched_layout_keys(layout_map, paths: Iterable[str]) -> list[str]:
    """The keys of `layout_map` that Keras matches to none of the variable `paths`.

    Introduced in chapter 16. The lookup is Keras's own (`LayoutMap.__getitem__`: an exact
    key, else `re.fullmatch` of each key against the whole path).
    """
    used = {id(layout_map[path]) for path in paths if layout_map[path] is not None}
    return [key for key in layout_map if id(layout_map[key]) not in used]


def check_layout_map(layout_map, paths: Iterable[str]) -> None:
    """Raise a ValueError naming the keys of `layout_map` that match no variable path.
    Introduced in chapter 16."""
    paths = list(paths)
    if not paths:
        raise ValueError("check_layout_map: give the paths of the model's variables.")
    unmatched = unmatched_layout_keys(layout_map, paths)
    if unmatched:
        raise ValueError(
            f"LayoutMap keys {unmatched} match no variable, so the variables they were "
            f"meant for stay replicated. Keys must match a whole path, such as "
            f"{paths[0]!r}: "
            "write the full path, or a pattern such as '.*hidden/kernel'."
        )
