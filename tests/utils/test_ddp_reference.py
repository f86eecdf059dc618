"""utils.ddp_reference (saved from chapter 6): the batches DistributedSampler gives each rank,
and their union, one process's equivalent (chapter 6's DDP worker is held equal to it in
tests/chapters/test_ch06_pytorch_dp_ddp.py)."""

from utils.ddp_reference import global_batches, rank_indices


def test_ranks_split_each_epoch_without_overlap_and_reshuffle():
    first = [rank_indices(10, 2, r, epoch=0, seed=0) for r in range(2)]
    assert len(first[0]) == len(first[1]) == 5 and not set(first[0]) & set(first[1])
    assert rank_indices(10, 2, 0, epoch=1, seed=0) != first[0]


def test_global_batches_join_the_ranks_batches():
    batches = global_batches(10, 2, batch_per_device=2, epoch=0, seed=0)
    ranks = [rank_indices(10, 2, r, 0, 0) for r in range(2)]
    assert batches == [ranks[0][0:2] + ranks[1][0:2], ranks[0][2:4] + ranks[1][2:4]]
