"""Private TensorFlow internals that the book relies on: a release that moves one fails here
(utils.devices.all_reduce_method's are checked in tests/utils/test_devices.py)."""

import os
import subprocess
import sys

import pytest


def test_the_private_auto_shard_rewrite_chapter_19_uses_still_exists():
    """Chapter 19 applies TensorFlow's own per-worker rewrite; a release that moves it fails
    here."""
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = tf.data.Dataset.range(6).with_options(options)
    assert [int(v) for v in _AutoShardDataset(dataset, 2, 1)] == [1, 3, 5]


@pytest.mark.full  # CI's own question (.ci/run): the full proof's
def test_ci_can_ask_tensorflow_whether_onednn_is_on():
    """.ci/run asks `IsMklEnabled` which CPU kernels TensorFlow uses by default, to run the
    full proof with the other ones: it must follow TF_ENABLE_ONEDNN_OPTS."""
    ask = "from tensorflow.python.util import _pywrap_util_port as p; print(int(p.IsMklEnabled()))"
    for setting in ("0", "1"):
        answer = subprocess.run(
            [sys.executable, "-c", ask],
            env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": setting},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert answer.stdout.strip() == setting, answer.stderr[-500:]
