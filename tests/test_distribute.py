"""utils.distribute: comparing weights; and the TensorFlow internal chapter 12 relies on."""

import numpy as np
import pytest

from utils.distribute import max_abs_difference


def test_max_abs_difference():
    a = [np.zeros((2, 2), np.float32), np.ones(3, np.float32)]
    b = [np.zeros((2, 2), np.float32), np.array([1, 1.5, 1], np.float32)]
    assert max_abs_difference(a, a) == 0.0
    assert max_abs_difference(a, b) == pytest.approx(0.5)
    assert max_abs_difference([], []) == 0.0


@pytest.mark.parametrize(
    "other, message", [([np.zeros((2, 2))], "2 arrays with 1"), ([np.zeros(4), np.zeros(3)], "shapes")]
)
def test_max_abs_difference_refuses_mismatches(other, message):
    with pytest.raises(ValueError, match=message):
        max_abs_difference([np.zeros((2, 2)), np.zeros(3)], other)


def test_the_private_auto_shard_rewrite_chapter_12_uses_still_exists():
    """Chapter 12 applies TensorFlow's own per-worker rewrite; a release that moves it fails here."""
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = tf.data.Dataset.range(6).with_options(options)
    assert [int(v) for v in _AutoShardDataset(dataset, 2, 1)] == [1, 3, 5]
