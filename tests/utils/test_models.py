"""utils.models: the seeded small CNN."""

import numpy as np

from utils.models import small_cnn


def test_small_cnn_is_reproducible_and_outputs_logits():
    first, second, other = small_cnn(), small_cnn(), small_cnn(seed=1)
    for a, b in zip(first.get_weights(), second.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first.get_weights()[0], other.get_weights()[0])
    assert first(np.zeros((2, 28, 28, 1), np.float32)).shape == (2, 10)


def test_resnet50_parameter_count_that_chapter_9_states():
    """Chapter 9's all-reduce table sizes ResNet-50 with a constant instead of building it."""
    import keras

    # RESNET50_PARAMETERS in chapters/09_processes_and_machines.ipynb, section 5
    assert keras.applications.ResNet50(weights=None).count_params() == 25_636_712
