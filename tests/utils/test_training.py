"""utils.training: fit and the scope helper, and fit against chapter 4's custom step, in a
fresh process (TensorFlow configures its devices once per process)."""

import re

import pytest

from tests.helpers import run_fresh


@pytest.mark.full  # starts Python programs: the full proof's
def test_mirrored_fit_equals_one_device_and_the_custom_step():
    """MirroredStrategy on 2 logical CPUs trains the same weights as one plain device, and
    make_distributed_step trains the same weights as fit; fit_model raises no Python warning,
    where `fit` with its default `shuffle=True` warns for a tf.data.Dataset."""
    result = run_fresh(
        """
        from utils import setup_devices
        devices = setup_devices(2, verbose=False)
        import keras
        import tensorflow as tf
        from utils import fit_model, load_mnist_subset, make_dataset
        from utils import max_abs_difference
        (x, y), _ = load_mnist_subset()
        # 5 steps of 64; no shuffle, so both runs see the same batches (chapter 3 says why)
        data = make_dataset(x[:320], y[:320], 64, shuffle=False)
        mirrored = tf.distribute.MirroredStrategy(devices=devices)
        one, one_history = fit_model(data, epochs=1)
        two, two_history = fit_model(data, strategy=mirrored, epochs=1)
        print("DIFF", max_abs_difference(one.get_weights(), two.get_weights()))
        print("XLA", one.jit_compile, two.jit_compile)
        import warnings
        with warnings.catch_warnings(record=True) as caught:  # fit's default, for contrast
            warnings.simplefilter("always")
            one.fit(data.take(1), verbose=0)
        print("DEFAULT_WARNS", any("shuffle=True" in str(w.message) for w in caught))

        from utils import make_distributed_step, model_and_optimizer
        custom, optimizer = model_and_optimizer(mirrored)
        print("MIRRORED", type(custom.weights[0].value).__name__, optimizer.built,
              round(float(optimizer.learning_rate.numpy()), 6))
        with mirrored.scope():
            accuracy = keras.metrics.SparseCategoricalAccuracy()
        step = make_distributed_step(mirrored, custom, optimizer, 64, metrics=[accuracy])
        losses = [float(step(batch)) for batch in mirrored.experimental_distribute_dataset(data)]
        print("CUSTOM", max_abs_difference(two.get_weights(), custom.get_weights()))
        print("CUSTOM_LOSS", sum(losses) / len(losses))
        print("ACCURACY", float(accuracy.result()), two_history["accuracy"][0])
        print("LOSS", one_history["loss"][0], two_history["loss"][0])
        print("EPOCHS", len(two_history["epoch_seconds"]))
        """
    )
    assert result.returncode == 0, result.stderr
    assert not re.search(r"\w+Warning: ", result.stderr), result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert float(lines["DIFF"]) < 1e-5, result.stdout
    one_loss, two_loss = map(float, lines["LOSS"].split())
    assert abs(one_loss - two_loss) < 1e-5
    assert lines["EPOCHS"] == "1"
    assert lines["MIRRORED"] == "MirroredVariable True 0.05"  # made in the scope, built
    assert lines["DEFAULT_WARNS"] == "True"  # what chapter 3 says of Keras 3.15
    assert lines["XLA"] == "False False"  # stated, not Keras's device-dependent "auto"
    assert float(lines["CUSTOM"]) < 1e-6  # the custom step trains what fit trains
    assert abs(float(lines["CUSTOM_LOSS"]) - two_loss) < 1e-5
    custom_accuracy, fit_accuracy = map(float, lines["ACCURACY"].split())
    assert abs(custom_accuracy - fit_accuracy) < 1e-6  # the metrics it updates are fit's
