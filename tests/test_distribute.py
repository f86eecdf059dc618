"""utils.distribute and utils.training: pure helpers in-process, strategies in fresh processes."""

import numpy as np
import pytest

from tests.helpers import run_fresh
from utils.distribute import max_abs_difference
from utils.plotting import plot_curves


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


def test_plot_curves_draws_one_line_per_run_and_panel_per_metric():
    histories = {f"run {i}": {"loss": [3, 2, 1], "accuracy": [0.1, 0.5, 0.9]} for i in range(5)}
    figure = plot_curves(histories, ["loss", "accuracy"], title="t")
    assert len(figure.axes) == 2
    assert all(len(axis.get_lines()) == 5 for axis in figure.axes)


def test_mirrored_fit_equals_one_device_and_the_custom_step_and_reports_its_all_reduce():
    """MirroredStrategy on 2 logical CPUs trains the same weights as one plain device, and
    make_distributed_step trains the same weights as fit."""
    result = run_fresh(
        """
        from utils import setup_devices
        devices = setup_devices(2, verbose=False)
        import tensorflow as tf
        from utils import all_reduce_method, fit_model, load_mnist_subset, make_dataset
        from utils import max_abs_difference
        (x, y), _ = load_mnist_subset()
        # 5 steps of 64; no shuffle, so both runs see the same batches (chapter 3 says why)
        data = make_dataset(x[:320], y[:320], 64, shuffle=False)
        mirrored = tf.distribute.MirroredStrategy(devices=devices)
        one, one_history = fit_model(data, epochs=1)
        two, two_history = fit_model(data, strategy=mirrored, epochs=1)
        print("DIFF", max_abs_difference(one.get_weights(), two.get_weights()))
        print("XLA", one.jit_compile, two.jit_compile)

        from utils import make_distributed_step, model_and_optimizer
        custom, optimizer = model_and_optimizer(mirrored)
        print("MIRRORED", type(custom.weights[0].value).__name__, optimizer.built,
              round(float(optimizer.learning_rate.numpy()), 6))
        step = make_distributed_step(mirrored, custom, optimizer, 64)
        losses = [float(step(batch)) for batch in mirrored.experimental_distribute_dataset(data)]
        print("CUSTOM", max_abs_difference(two.get_weights(), custom.get_weights()))
        print("CUSTOM_LOSS", sum(losses) / len(losses))
        print("LOSS", one_history["loss"][0], two_history["loss"][0])
        print("EPOCHS", len(two_history["epoch_seconds"]))
        print("METHOD", all_reduce_method(mirrored))
        reduction = tf.distribute.MirroredStrategy(
            devices=devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
        print("METHOD", all_reduce_method(reduction))
        """
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert float(lines["DIFF"]) < 1e-5, result.stdout
    one_loss, two_loss = map(float, lines["LOSS"].split())
    assert abs(one_loss - two_loss) < 1e-5
    assert lines["EPOCHS"] == "1"
    assert lines["MIRRORED"] == "MirroredVariable True 0.05"  # made in the scope, built
    assert lines["XLA"] == "False False"  # stated, not Keras's device-dependent "auto"
    assert float(lines["CUSTOM"]) < 1e-6  # the custom step trains what fit trains
    assert abs(float(lines["CUSTOM_LOSS"]) - two_loss) < 1e-5
    assert "METHOD CollectiveAllReduce (RING)" in result.stdout
    assert "METHOD ReductionToOneDevice" in result.stdout


def test_the_private_auto_shard_rewrite_chapter_12_uses_still_exists():
    """Chapter 12 applies TensorFlow's own per-worker rewrite; a release that moves it fails here."""
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    dataset = tf.data.Dataset.range(6).with_options(options)
    assert [int(v) for v in _AutoShardDataset(dataset, 2, 1)] == [1, 3, 5]
