"""utils.devices: planning (all branches, no TensorFlow) and real setup in fresh processes.

TensorFlow can configure devices once per process, so each real setup runs in its own
Python process; the pure planning function covers the GPU branches this machine lacks.
"""

import pytest

from tests.helpers import run_fresh
from utils.devices import MAX_LOGICAL_DEVICES, plan_devices, setup_devices


@pytest.mark.parametrize(
    "n, num_gpus, kind, split",
    [
        (1, 0, "CPU", True),
        (4, 0, "CPU", True),
        (1, 1, "GPU", False),
        (3, 1, "GPU", True),
        (2, 2, "GPU", False),
        (2, 8, "GPU", False),
        (32, 32, "GPU", False),
    ],
)
def test_plan_covers_every_machine(n, num_gpus, kind, split):
    plan = plan_devices(n, num_gpus)
    assert (plan.kind, plan.split) == (kind, split)


def test_plan_refuses_more_devices_than_several_gpus():
    with pytest.raises(ValueError, match="at most 2 devices"):
        plan_devices(4, 2)


@pytest.mark.parametrize("num_gpus", [0, 1])
def test_plan_refuses_too_many_logical_devices(num_gpus):
    with pytest.raises(ValueError, match=f"at most {MAX_LOGICAL_DEVICES}"):
        plan_devices(MAX_LOGICAL_DEVICES + 1, num_gpus)


@pytest.mark.parametrize("bad", [0, -1, 2.0, "2", True, None])
def test_rejects_what_is_not_a_count(bad):
    with pytest.raises(
        ValueError,
        match=r"^setup_devices: n \(the number of devices\) must be an int of at least 1",
    ):
        setup_devices(bad)


@pytest.mark.parametrize("bad", [0, 63, 2048.0, "2048", True])
def test_rejects_bad_gpu_memory_limit(bad):
    with pytest.raises(ValueError, match="gpu_memory_limit_mb"):
        setup_devices(2, gpu_memory_limit_mb=bad)


def test_describes_each_plan():
    assert "logical CPU" in plan_devices(2, 0).describe(None)
    assert plan_devices(2, 0).simulated and plan_devices(2, 1).simulated
    assert not plan_devices(2, 4).simulated and not plan_devices(1, 1).simulated
    assert "2048 MB" in plan_devices(2, 1).describe(None)
    assert "1000 MB" in plan_devices(2, 1).describe(1000)
    assert "2 of 4 physical GPU(s), memory growth on; TF32 off" in plan_devices(2, 4).describe(None)
    assert "1 of 1 physical GPU(s), capped at 4096 MB" in plan_devices(1, 1).describe(4096)


class FakeGPUs:
    """Stands in for TensorFlow's device configuration on a machine with `count` GPUs and
    records what `setup_devices` asks of it."""

    def __init__(self, monkeypatch, count):
        import tensorflow as tf

        self.calls = []
        self.gpus = [
            tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(count)
        ]
        self.logical = []
        config, experimental = tf.config, tf.config.experimental
        monkeypatch.setattr(
            config, "list_physical_devices", lambda kind=None: self.gpus if kind == "GPU" else []
        )
        monkeypatch.setattr(config, "set_logical_device_configuration", self.configure)
        monkeypatch.setattr(config, "list_logical_devices", lambda kind=None: self.logical)
        monkeypatch.setattr(experimental, "get_memory_growth", lambda gpu: False)
        monkeypatch.setattr(
            experimental,
            "set_memory_growth",
            lambda gpu, on: self.calls.append(("growth", gpu.name, on)),
        )
        monkeypatch.setattr(
            experimental,
            "enable_tensor_float_32_execution",
            lambda on: self.calls.append(("tf32", on)),
        )
        self.logical = [tf.config.LogicalDevice(f"/device:GPU:{i}", "GPU") for i in range(count)]

    def configure(self, gpu, configs):
        import tensorflow as tf

        self.calls.append(("limit", gpu.name, [c.memory_limit for c in configs]))
        if len(configs) > 1:
            self.logical = [
                tf.config.LogicalDevice(f"/device:GPU:{i}", "GPU") for i in range(len(configs))
            ]


def test_one_gpu_honours_the_memory_limit(monkeypatch):
    fake = FakeGPUs(monkeypatch, 1)
    assert setup_devices(1, gpu_memory_limit_mb=1024, verbose=False) == ["/device:GPU:0"]
    assert fake.calls == [("limit", "/physical_device:GPU:0", [1024]), ("tf32", False)]


def test_one_gpu_without_a_limit_grows(monkeypatch):
    fake = FakeGPUs(monkeypatch, 1)
    setup_devices(1, verbose=False)
    assert fake.calls == [("growth", "/physical_device:GPU:0", True), ("tf32", False)]


def test_one_gpu_split_uses_the_default_limit(monkeypatch):
    fake = FakeGPUs(monkeypatch, 1)
    assert len(setup_devices(3, verbose=False)) == 3
    assert fake.calls[0] == ("limit", "/physical_device:GPU:0", [2048] * 3)


def test_eight_gpus_cap_only_those_used(monkeypatch):
    fake = FakeGPUs(monkeypatch, 8)
    devices = setup_devices(2, gpu_memory_limit_mb=8000, verbose=False)
    assert devices == ["/device:GPU:0", "/device:GPU:1"]
    assert fake.calls == [("limit", f"/physical_device:GPU:{i}", [8000]) for i in range(2)] + [
        ("tf32", False)
    ]


@pytest.mark.full  # starts Python programs: the full proof's
def test_two_logical_cpus_rerun_harmless_other_count_says_restart_all_reduce_named():
    result = run_fresh(
        """
        import numpy as np
        from utils import all_reduce_method, setup_devices
        first = setup_devices(2)
        again = setup_devices(2, verbose=False)
        assert first == again, (first, again)
        assert len(set(first)) == 2, first
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy(devices=first)
        assert strategy.num_replicas_in_sync == 2
        for name in first:
            with tf.device(name):
                assert tf.ones(1).device.endswith(name.split("device:")[-1])
        print("OK", first)
        try:
            setup_devices(3, verbose=False)
        except RuntimeError as err:
            print("RAISED", err)
        print("METHOD", all_reduce_method(strategy))
        reduction = tf.distribute.MirroredStrategy(
            devices=first, cross_device_ops=tf.distribute.ReductionToOneDevice())
        print("METHOD", all_reduce_method(reduction))
        """
    )
    assert result.returncode == 0, result.stderr
    assert "OK ['/device:CPU:0', '/device:CPU:1']" in result.stdout
    assert "RAISED setup_devices(3) cannot take effect" in result.stdout
    assert "Restart the kernel" in result.stdout
    assert "METHOD CollectiveAllReduce (RING)" in result.stdout  # reads private attributes
    assert "METHOD ReductionToOneDevice" in result.stdout
    assert "setup_devices(2): 2 logical CPU" in result.stdout


@pytest.mark.full  # starts Python programs: the full proof's
def test_one_device_is_the_plain_cpu():
    result = run_fresh(
        """
        from utils import setup_devices
        print("OK", setup_devices(1, verbose=False))
        """
    )
    assert result.returncode == 0, result.stderr
    assert "OK ['/device:CPU:0']" in result.stdout


@pytest.mark.full  # starts Python programs: the full proof's
def test_tensorflow_started_first_says_restart():
    result = run_fresh(
        """
        import tensorflow as tf
        tf.constant(1.0)  # starts the runtime with the default configuration
        from utils import setup_devices
        try:
            setup_devices(2, verbose=False)
        except RuntimeError as err:
            print("RAISED", err)
        """
    )
    assert result.returncode == 0, result.stderr
    assert "RAISED setup_devices(2) cannot take effect" in result.stdout
    assert "Traceback" not in result.stdout


def test_importing_utils_loads_neither_framework():
    result = run_fresh(
        """
        import sys
        from utils import setup_devices, printbar
        print("LOADED", sorted(m for m in ("tensorflow", "torch") if m in sys.modules))
        """
    )
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout
