"""The knob values a reader might choose before pressing "Run all" again, per chapter.

nbval_policy.RunAllAgain runs every chapter a second time in the same kernel, with these values
put in after its `parameters` cell: a chapter must hold for other sensible values of its
knobs (every assertion in it still passes) and must survive being run twice. Most are
cheaper than the committed values (fewer epochs, examples, timed repeats or batch sizes), which
keeps the second run short; chapter 1 trains longer, so "more epochs" is covered too.
tests/book/test_notebooks.py checks that each name is a knob of its chapter.
"""

OTHER_KNOBS: dict[str, dict[str, object]] = {
    "quick_start": {"EPOCHS": 2, "PROCESSES": 3},
    # more epochs, of larger batches: 5 x 31 = 155 steps, past the 150 its 90% check needs
    "01_single_gpu": {"EPOCHS": 5, "GLOBAL_BATCH": 128, "MATMUL_SHAPE": (1000, 100, 10000)},
    "02_simulating_devices": {"ROWS": 2048, "REPEATS": 3},
    "03_mirrored_fit": {"EPOCHS": 1},  # another batch size: tests/book/test_knobs.py
    "04_custom_loops": {"EPOCHS": 1},  # 4 devices and 1 epoch: tests/book/test_knobs.py
    "05_data_parallel_by_hand": {"EPOCHS": 1, "GLOBAL_BATCH": 64},
    "appendix_multi_gpu_model": {"EPOCHS": 1, "LEARNING_RATE": 0.1},
    "06_pytorch_dp_ddp": {"EPOCHS": 1, "BATCH_PER_DEVICE": 64},
    # STEPS, BLOCKS as committed: shorter timings let a busy neighbour skew the scaling claim
    "07_performance": {"INPUT_EXAMPLES": 640, "GLOBAL_BATCHES": (128, 512)},
    "08_fault_tolerance": {
        "EXAMPLES": 960,
        "EPOCHS": 3,
        "INTERRUPT_AT": (1, 5),
        "INTERRUPT_STEP": 30,
    },
    "09_processes_and_machines": {"EXAMPLES": 512, "BATCH_PER_DEVICE": 64},
    "10_tensorflow_and_keras_across_processes": {"EXAMPLES": 512, "GLOBAL_BATCH": 128},
    "11_feeding_many_devices": {"EXAMPLES": 512, "SHARDS": 4, "GLOBAL_BATCH": 32},
    "12_splitting_the_batch": {  # BN_ knobs: a restart
        "MULTIPLES": (1, 8),
        "EPOCHS": 1,
    },
    "13_precision_and_accumulation": {"PRECISION_EXAMPLES": 640},
    "14_sharded_data_parallelism": {
        "EXAMPLES": 256,
        "GLOBAL_BATCH": 96,
        "STEPS": 2,
        "PROCESSES": 3,
    },
    "15_fsdp2_and_sharded_checkpoints": {
        "EXAMPLES": 192,
        "GLOBAL_BATCH": 96,
        "STEPS": 2,
        "PROCESSES": 3,
    },
    "16_layouts_and_recomputation": {"GLOBAL_BATCH": 32},
    "17_inside_one_step": {"EXAMPLES": 192, "GLOBAL_BATCH": 32, "STEPS": 4},
    "18_transformer_compute_and_memory": {
        "CONTEXT": 96,
        "WIDTH": 96,
        "LAYERS": 3,
        "HEADS": 3,
        "BATCH_PER_DEVICE": 8,
        "STEPS": 200,
        "LENGTHS": [48, 96, 192],
    },
    "19_troubleshooting": {"GLOBAL_BATCH": 128},
}


def assignments(chapter: str) -> str:
    """The code cell that sets `chapter`'s other knob values ("" for a chapter with none)."""
    return "\n".join(f"{name} = {value!r}" for name, value in OTHER_KNOBS.get(chapter, {}).items())
