"""Private TensorFlow internals that the book relies on: a release that moves one fails here
(utils.devices.all_reduce_method's are checked in tests/test_devices.py)."""


def test_the_private_auto_shard_rewrite_chapter_15_uses_still_exists():
    """Chapter 15 applies TensorFlow's own per-worker rewrite; a release that moves it fails
    here."""
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = tf.data.Dataset.range(6).with_options(options)
    assert [int(v) for v in _AutoShardDataset(dataset, 2, 1)] == [1, 3, 5]
