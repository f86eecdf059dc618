"""Helpers shared by every chapter of the book.

Each function is written once here and imported by the notebooks; its docstring names
the chapter that introduces it. Names are imported on first use, so `from utils import
setup_devices` does not load TensorFlow, and the PyTorch helpers do not load it either.
"""

import importlib

_HOMES = {
    "BOOK_CACHE": "utils.data",
    "batch_examples": "utils.data",
    "load_mnist_subset": "utils.data",
    "make_dataset": "utils.data",
    "read_image_folder": "utils.data",
    "write_image_folders": "utils.data",
    "setup_devices": "utils.devices",
    "import_tensorflow_datasets": "utils.tfds_import",
    "error_line": "utils.errors",
    "all_reduce_method": "utils.devices",
    "max_abs_difference": "utils.compare",
    "small_cnn": "utils.models",
    "draw_average_loss": "utils.figures_one_machine_keras",
    "draw_collectives": "utils.figures_one_machine_keras",
    "draw_data_parallel_step": "utils.figures_foundations",
    "draw_dp_and_ddp": "utils.figures_one_machine_pytorch",
    "draw_files_read": "utils.figures_processes_and_machines",
    "draw_funnel_and_ring": "utils.figures_appendix",
    "draw_mirrored_strategy": "utils.figures_one_machine_keras",
    "draw_resume_timeline": "utils.figures_fast_and_robust",
    "draw_ring_all_reduce": "utils.figures_one_machine_keras",
    "draw_tf_config": "utils.figures_processes_and_machines",
    "draw_torchrun_launch": "utils.figures_processes_and_machines",
    "draw_zero_holdings": "utils.figures_at_scale",
    "draw_collective_sequence": "utils.figures_at_scale",
    "draw_device_mesh": "utils.figures_at_scale",
    "plot_step_timeline": "utils.figures_at_scale",
    "plot_against_length": "utils.figures_at_scale",
    "plot_compute_and_communication": "utils.figures_at_scale",
    "plot_curves": "utils.figures_one_machine_keras",
    "median_time": "utils.timing",
    "printbar": "utils.timing",
    "steady_epoch_seconds": "utils.timing",
    "timer": "utils.timing",
    "EpochTimes": "utils.training",
    "fit_model": "utils.training",
    "make_distributed_step": "utils.custom_step",
    "model_and_optimizer": "utils.training",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'utils' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    return __all__
