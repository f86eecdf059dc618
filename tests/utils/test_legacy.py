"""utils.legacy.multi_gpu_model on two logical CPUs (fresh process) and its argument checks."""

import pytest

from tests.helpers import run_fresh


@pytest.mark.full  # starts Python programs: the full proof's
def test_parallel_model_matches_template_and_trains_like_it():
    result = run_fresh(
        """
        from utils import setup_devices
        devices = setup_devices(2, verbose=False)
        import numpy as np
        import keras
        import pytest
        import tensorflow as tf
        from utils import max_abs_difference, small_cnn
        from utils.legacy import multi_gpu_model

        template = small_cnn()
        parallel = multi_gpu_model(template, devices)
        x = np.random.default_rng(0).random((7, 28, 28, 1), dtype=np.float32)
        for batch in (8, 7, 2):  # even, uneven (last device takes 4), the smallest allowed
            gap = np.abs(parallel(x[:batch]).numpy() - template(x[:batch]).numpy()).max()
            assert gap < 1e-5, (batch, gap)
        # shared, not copied: the wrapper's weights are the template's variables themselves
        assert [id(w) for w in parallel.weights] == [id(w) for w in template.weights]
        with pytest.raises(tf.errors.InvalidArgumentError, match="at least one example per"):
            parallel(x[:1])

        # one SGD step through the wrapper equals one step of the template alone
        y = np.arange(7) % 10
        steps = []
        for build in (lambda m: multi_gpu_model(m, devices), lambda m: m):
            model = small_cnn()
            trained = build(model)
            trained.compile(optimizer=keras.optimizers.SGD(0.1),
                            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            trained.fit(x, y, batch_size=7, epochs=1, verbose=0, shuffle=False)
            steps.append(model.get_weights())
        assert max_abs_difference(*steps) < 1e-6, max_abs_difference(*steps)
        print("OK")
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")


@pytest.mark.parametrize(
    "devices, error, message",
    [
        (["/cpu:0"], ValueError, "at least 2 distinct"),
        (["/cpu:0", "/cpu:0"], ValueError, "at least 2 distinct"),
    ],
)
def test_multi_gpu_model_refuses_bad_devices(devices, error, message):
    from utils.legacy import multi_gpu_model
    from utils.models import small_cnn

    with pytest.raises(error, match=message):
        multi_gpu_model(small_cnn(), devices)


def test_multi_gpu_model_needs_a_keras_model():
    from utils.legacy import multi_gpu_model

    with pytest.raises(TypeError, match="keras.Model"):
        multi_gpu_model(lambda x: x, ["/cpu:0", "/cpu:1"])
