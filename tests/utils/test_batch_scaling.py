"""utils.batch_scaling: the linear scaling rule and its warm-up (chapter 12)."""

import keras
import numpy as np
import pytest

from utils.batch_scaling import LinearWarmup, linear_scaled_learning_rate


def test_linear_rule_scales_with_the_global_batch():
    assert linear_scaled_learning_rate(0.05, 32, 32) == pytest.approx(0.05)
    assert linear_scaled_learning_rate(0.05, 32, 256) == pytest.approx(0.4)
    assert linear_scaled_learning_rate(0.1, 64, 32) == pytest.approx(0.05)


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 32, 64), "base_lr must be a positive number"),
        (("0.1", 32, 64), "base_lr must be a positive number"),
        ((0.1, 0, 64), "base_batch must be an int of at least 1"),
        ((0.1, 32.0, 64), "base_batch must be an int of at least 1"),
        ((0.1, 32, -1), "global_batch must be an int of at least 1"),
        ((0.1, 32, True), "global_batch must be an int of at least 1"),
    ],
)
def test_linear_rule_rejects_bad_inputs(args, message):
    with pytest.raises(ValueError, match=message):
        linear_scaled_learning_rate(*args)


def test_warmup_rises_linearly_then_holds():
    schedule = LinearWarmup(0.05, 0.4, warmup_steps=10)
    values = [float(schedule(step)) for step in (0, 5, 10, 11, 1000)]
    assert values == pytest.approx([0.05, 0.225, 0.4, 0.4, 0.4])


def test_warmup_drives_a_keras_optimizer_and_serializes():
    schedule = LinearWarmup(0.1, 0.2, warmup_steps=4)
    optimizer = keras.optimizers.SGD(schedule)
    variable = keras.Variable(np.zeros(1, "float32"))
    for _ in range(2):
        optimizer.apply_gradients([(np.ones(1, "float32"), variable)])
    assert float(variable.numpy()[0]) == pytest.approx(-(0.1 + 0.125))
    assert LinearWarmup.from_config(schedule.get_config()).get_config() == schedule.get_config()


@pytest.mark.parametrize(
    "args, message",
    [
        ((0.0, 0.4, 10), "start must be a positive number"),
        ((0.1, -1, 10), "target must be a positive number"),
        ((0.1, 0.4, 0), "warmup_steps must be an int of at least 1"),
        ((0.1, 0.4, 2.5), "warmup_steps must be an int of at least 1"),
    ],
)
def test_warmup_rejects_bad_inputs(args, message):
    with pytest.raises(ValueError, match=message):
        LinearWarmup(*args)
