"""utils.layouts: LayoutMap keys that match no variable are found with Keras's own lookup."""

import keras
import pytest
from keras.distribution import DeviceMesh, LayoutMap

from utils.layouts import check_layout_map, unmatched_layout_keys

PATHS = ["mlp/hidden/kernel", "mlp/hidden/bias", "mlp/logits/kernel"]


def layout_map(*keys):
    devices = keras.distribution.list_devices()[:1]
    mapping = LayoutMap(DeviceMesh((1,), ["batch"], devices))
    for key in keys:
        mapping[key] = (None, "batch")
    return mapping


def test_a_key_must_match_the_whole_path():
    mapping = layout_map("hidden/kernel", ".*logits/kernel", "mlp/hidden/bias")
    assert unmatched_layout_keys(mapping, PATHS) == ["hidden/kernel"]
    check_layout_map(layout_map(".*kernel"), PATHS)  # matches two: no error


def test_a_layout_for_a_missing_variable_is_an_error_that_says_what_to_write():
    with pytest.raises(
        ValueError, match=r"\['dense/kernel'\] match no variable.*'\.\*hidden/kernel'"
    ):
        check_layout_map(layout_map("dense/kernel"), PATHS)


def test_no_paths_is_an_error_that_says_what_to_give():
    with pytest.raises(ValueError, match="give the paths"):
        check_layout_map(layout_map(".*kernel"), [])
