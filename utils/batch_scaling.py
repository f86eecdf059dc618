"""What to change when the global batch grows: the linear rule and its warm-up.

Written in chapter 12 (12_splitting_the_batch.ipynb), in its cells marked `# @save`: edit
them there, re-run the chapter, then run `python -m tools.save_from_chapters`.
"""

import keras

from utils.checks import check_int, check_positive


def linear_scaled_learning_rate(
    base_lr: float, base_batch: int, global_batch: int
) -> float:
    """The linear scaling rule: a `global_batch` k times `base_batch` gets k times
    `base_lr`, the learning rate tuned for `base_batch` on one device. `global_batch` is
    what a step now takes (per-replica batch x replicas)."""
    check_positive("base_lr", base_lr)
    check_int("base_batch", base_batch)
    check_int("global_batch", global_batch)
    return base_lr * global_batch / base_batch


class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """Rise linearly from `start` to `target` over `warmup_steps` steps, then stay at
    `target`. Goyal et al. start a large-batch run at the small-batch learning rate and
    reach the linearly scaled one after a few epochs."""

    def __init__(self, start: float, target: float, warmup_steps: int) -> None:
        self.start = check_positive("start", start)
        self.target = check_positive("target", target)
        self.warmup_steps = check_int("warmup_steps", warmup_steps)

    def __call__(self, step):
        progress = keras.ops.minimum(
            keras.ops.cast(step, "float32") / self.warmup_steps, 1.0
        )
        return self.start + (self.target - self.start) * progress

    def get_config(self) -> dict:  # lets Keras save a model compiled with it
        return {
            "start": self.start,
            "target": self.target,
            "warmup_steps": self.warmup_steps,
        }
