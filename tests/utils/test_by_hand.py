"""utils.by_hand on two logical CPUs (in a fresh process) and the pure ring schedule."""

from collections import Counter

import pytest

from tests.helpers import run_fresh
from utils.by_hand import ring_schedule


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_ring_schedule_sends_2_n_minus_1_chunks_per_device(n):
    transfers = ring_schedule(n)
    sent = Counter(t.source for t in transfers)
    received = Counter(t.target for t in transfers)
    assert all(sent[d] == 2 * (n - 1) == received[d] for d in range(n))
    assert all(t.target == (t.source + 1) % n for t in transfers)  # only to the neighbour


@pytest.mark.parametrize("n", [2, 3, 5])
def test_ring_schedule_leaves_every_chunk_complete_everywhere(n):
    # holdings[d][c] = set of devices whose share of chunk c is summed into device d's copy
    holdings = [[{d} for _ in range(n)] for d in range(n)]
    for t in ring_schedule(n):
        incoming = set(holdings[t.source][t.chunk])
        if t.phase == "reduce-scatter":
            assert not incoming & holdings[t.target][t.chunk]  # nothing is added twice
            holdings[t.target][t.chunk] |= incoming
        else:
            holdings[t.target][t.chunk] = incoming
    assert all(chunk == set(range(n)) for device in holdings for chunk in device)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_ring_schedule_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="must be an int of at least 1"):
        ring_schedule(bad)


@pytest.mark.full  # starts Python programs: the full proof's
def test_split_and_all_reduce_on_logical_devices():
    result = run_fresh(
        """
        from utils import setup_devices
        devices = setup_devices(3, verbose=False)
        import numpy as np
        import pytest
        import tensorflow as tf
        from utils.by_hand import all_reduce_sum, ring_all_reduce, split_and_load

        # even and uneven splits, placement, and nothing lost
        parts = split_and_load(np.arange(12).reshape(6, 2), devices)
        assert [p.shape[0] for p in parts] == [2, 2, 2]
        prefix = "/job:localhost/replica:0/task:0/device"
        assert [p.device for p in parts] == [d.replace("/device", prefix) for d in devices]
        parts = split_and_load(np.arange(7), devices)
        assert [p.numpy().tolist() for p in parts] == [[0, 1, 2], [3, 4], [5, 6]]
        one = split_and_load(np.arange(3), devices[:1])
        assert [p.numpy().tolist() for p in one] == [[0, 1, 2]]
        for args, message in [((np.arange(2), devices), "2 rows cannot feed 3"),
                              ((np.arange(2), []), "at least one device")]:
            with pytest.raises(ValueError, match=message):
                split_and_load(*args)

        rng = np.random.default_rng(0)
        for shape in [(5, 7), (2,), (), (1, 3, 3)]:
            values = [rng.normal(size=shape).astype("float32") for _ in devices]
            tensors = []
            for device, value in zip(devices, values):
                with tf.device(device):
                    tensors.append(tf.constant(value))
            expected = np.sum(values, axis=0)
            for reduce in (all_reduce_sum, ring_all_reduce):
                results = reduce(tensors)
                assert len(results) == 3
                for tensor, result in zip(tensors, results):
                    assert result.device == tensor.device
                    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-5, atol=1e-6)
        # a single device: the sum of one tensor is itself
        with tf.device(devices[0]):
            alone = tf.constant([1.0, 2.0])
        assert ring_all_reduce([alone])[0].numpy().tolist() == [1.0, 2.0]
        assert all_reduce_sum([alone])[0].numpy().tolist() == [1.0, 2.0]
        for reduce in (all_reduce_sum, ring_all_reduce):
            with pytest.raises(ValueError, match="at least one tensor"):
                reduce([])
        with tf.device(devices[1]):
            other = tf.constant([1.0, 2.0, 3.0])
        with pytest.raises(ValueError, match="same shape"):
            ring_all_reduce([alone, other])
        print("OK")
        """
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")
