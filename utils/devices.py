"""Choosing real devices or simulating several (chapter 1; used by every chapter).

TensorFlow lets a program split one physical device into several *logical* devices, but
only before its runtime starts. `setup_devices` hides the three cases a reader meets
(several GPUs, one GPU, no GPU) behind one call that returns device names to hand to
`tf.distribute.MirroredStrategy(devices=...)`. `all_reduce_method` tells which all-reduce a
strategy chose for them (chapter 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from utils.checks import check_int

#: Most logical devices we carve out of one physical device. More only slows a simulation.
MAX_LOGICAL_DEVICES = 16
#: Memory given to each logical GPU when one physical GPU is split (a Colab T4 has ~15 GB).
DEFAULT_GPU_MEMORY_LIMIT_MB = 2048


@dataclass(frozen=True)
class DevicePlan:
    """How `n` devices are obtained on a machine with `num_gpus` physical GPUs."""

    n: int
    num_gpus: int
    kind: str  # "GPU" or "CPU": the device type the returned names refer to
    split: bool  # True when one physical device is carved into n logical devices

    @property
    def simulated(self) -> bool:
        """True when the devices are logical ones sharing one physical device."""
        return self.kind == "CPU" or self.split

    def describe(self, gpu_memory_limit_mb: int | None) -> str:
        """What was set up, in a few words (`setup_devices` prints it)."""
        if self.kind == "CPU":
            return (
                f"{self.n} logical CPU device(s) on this machine's cores (no GPU found)"
            )
        if self.split:
            return (
                f"{self.n} logical GPUs of {gpu_memory_limit_mb or DEFAULT_GPU_MEMORY_LIMIT_MB} "
                "MB each, carved out of 1 physical GPU; TF32 off"
            )
        memory = (
            f"capped at {gpu_memory_limit_mb} MB each"
            if gpu_memory_limit_mb
            else "memory growth on"
        )
        return f"{self.n} of {self.num_gpus} physical GPU(s), {memory}; TF32 off"


def plan_devices(n: int, num_gpus: int) -> DevicePlan:
    """Decide how to get `n` devices given `num_gpus` physical GPUs (no TensorFlow calls).

    Enough GPUs: use `n` of them. Exactly one GPU: split it. No GPU: split the CPU.
    """
    n = check_int("setup_devices: n (the number of devices)", n)
    if num_gpus >= n:
        return DevicePlan(n, num_gpus, "GPU", split=False)
    if num_gpus > 1:
        raise ValueError(
            f"setup_devices({n}): this machine has {num_gpus} GPUs. Ask for at most "
            f"{num_gpus} devices (splitting several GPUs into logical ones is not supported)."
        )
    if n > MAX_LOGICAL_DEVICES:
        raise ValueError(
            f"setup_devices({n}): {n} logical devices on one physical device is more than "
            f"is useful; ask for at most {MAX_LOGICAL_DEVICES} (2 to 4 show everything)."
        )
    return DevicePlan(n, num_gpus, "GPU" if num_gpus == 1 else "CPU", split=True)


def _restart_message(n: int) -> str:
    return (
        f"setup_devices({n}) cannot take effect: TensorFlow has already started with a "
        "different device setup, and devices can only be configured before it starts. "
        "Restart the kernel (Colab: Runtime > Restart session) and call setup_devices() "
        "before any other TensorFlow call."
    )


def _check_memory_limit(gpu_memory_limit_mb: object) -> None:
    if gpu_memory_limit_mb is not None:
        check_int(
            "setup_devices: gpu_memory_limit_mb (None, or megabytes)",
            gpu_memory_limit_mb,
            least=64,
        )


def setup_devices(
    n: int,
    *,
    gpu_memory_limit_mb: int | None = None,
    verbose: bool = True,
) -> list[str]:
    """Return the names of `n` distinct devices for `MirroredStrategy(devices=...)`.

    Introduced in chapter 1. With at least `n` physical GPUs, the first `n` are used, each
    capped at `gpu_memory_limit_mb` if given, else with memory growth on. With exactly one
    GPU and `n > 1`, it is split into `n` logical GPUs of `gpu_memory_limit_mb` each
    (default 2048). With no GPU, the CPU is split into `n` logical CPUs.

    On GPUs it turns TensorFlow's TF32 mode off (Ampere and newer GPUs otherwise multiply
    float32 matrices with 10-bit mantissas), so the book's float32 comparisons hold there.

    Call it before any other TensorFlow call. Calling it again with the same request returns
    the same names; a different request once TensorFlow runs raises RuntimeError.
    """
    _check_memory_limit(gpu_memory_limit_mb)
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    plan = plan_devices(n, len(gpus))
    try:
        if plan.kind == "CPU":
            cpu = tf.config.list_physical_devices("CPU")[0]
            logical = [tf.config.LogicalDeviceConfiguration()] * plan.n
            tf.config.set_logical_device_configuration(cpu, logical)
        elif plan.split:
            limit = gpu_memory_limit_mb or DEFAULT_GPU_MEMORY_LIMIT_MB
            config = tf.config.LogicalDeviceConfiguration(memory_limit=limit)
            tf.config.set_logical_device_configuration(gpus[0], [config] * plan.n)
        elif gpu_memory_limit_mb:
            config = tf.config.LogicalDeviceConfiguration(
                memory_limit=gpu_memory_limit_mb
            )
            for gpu in gpus[: plan.n]:
                tf.config.set_logical_device_configuration(gpu, [config])
        else:
            for gpu in gpus:
                if not tf.config.experimental.get_memory_growth(gpu):
                    tf.config.experimental.set_memory_growth(gpu, True)
    except (RuntimeError, ValueError):
        # TF's own messages ("Virtual devices cannot be modified after being initialized",
        # "Cannot set memory growth on device when virtual devices configured") do not say
        # what to do; ours does.
        raise RuntimeError(_restart_message(plan.n)) from None
    if gpus:
        tf.config.experimental.enable_tensor_float_32_execution(False)

    devices = [device.name for device in tf.config.list_logical_devices(plan.kind)][
        : plan.n
    ]
    if len(devices) != plan.n:  # e.g. CUDA_VISIBLE_DEVICES changed what TF can see
        raise RuntimeError(_restart_message(plan.n))
    if verbose:
        print(f"setup_devices({plan.n}): {plan.describe(gpu_memory_limit_mb)}")
        if plan.simulated:
            print("  a simulation: it checks correctness, not speed")
        print("  devices:", ", ".join(devices))
    return devices


def all_reduce_method(strategy) -> str:
    """Name the all-reduce a `MirroredStrategy` uses, e.g. "CollectiveAllReduce (RING)".

    Introduced in chapter 2. TensorFlow has no public API for this, so it reads the
    strategy's private attributes; the unit tests catch a release that renames them.
    """
    extended = strategy.extended
    method = type(extended._cross_device_ops).__name__
    if method == "CollectiveAllReduce":
        implementation = extended._communication_options.implementation
        return f"{method} ({implementation.name})"
    return method
