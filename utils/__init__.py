"""Helpers shared by every chapter of the book.

Each function is written once here and imported by the notebooks; its docstring names
the chapter that introduces it.
"""

from utils.data import load_mnist_subset, make_dataset
from utils.devices import setup_devices
from utils.models import small_cnn
from utils.timing import median_time, printbar, timer

__all__ = [
    "load_mnist_subset",
    "make_dataset",
    "median_time",
    "printbar",
    "setup_devices",
    "small_cnn",
    "timer",
]
