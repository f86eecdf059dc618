"""Helpers shared by every chapter of the book.

Each function is written once here and imported by the notebooks; its docstring names
the chapter that introduces it.
"""

from utils.data import (
    BOOK_CACHE,
    batch_examples,
    load_mnist_subset,
    make_dataset,
    read_image_folder,
    write_image_folders,
)
from utils.devices import setup_devices
from utils.distribute import all_reduce_method, max_abs_difference
from utils.models import small_cnn
from utils.plotting import plot_curves
from utils.timing import median_time, printbar, timer
from utils.training import EpochTimes, fit_model

__all__ = [
    "BOOK_CACHE",
    "EpochTimes",
    "all_reduce_method",
    "batch_examples",
    "fit_model",
    "load_mnist_subset",
    "make_dataset",
    "max_abs_difference",
    "median_time",
    "plot_curves",
    "printbar",
    "read_image_folder",
    "setup_devices",
    "small_cnn",
    "timer",
    "write_image_folders",
]
