"""Batch samplers: P x K layout, rank shards of one global sequence, determinism by seed and epoch."""

import time

import numpy as np
import pytest

from fdsml.data.samplers import ClassBalancedBatchSampler, ExplicitTripletBatchSampler

LABELS = np.repeat(np.array([3, 5, 8, 13, 21, 34]), 10)[np.random.default_rng(0).permutation(60)]


def test_batches_hold_p_distinct_classes_of_k_distinct_instances():
    sampler = ClassBalancedBatchSampler(LABELS, 4, 3, seed=1, batches_per_epoch=20)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 20
    for batch in batches:
        assert len(batch) == 12 and len(set(batch)) == 12
        classes = LABELS[np.array(batch)].reshape(4, 3)
        assert np.all(classes == classes[:, :1])
        assert len(set(classes[:, 0])) == 4


def test_instances_come_back_only_after_their_class_is_used_up():
    sampler = ClassBalancedBatchSampler(LABELS, 6, 2, seed=0, batches_per_epoch=5)  # every class, 5 x 2 = 10 each
    seen = np.concatenate(list(sampler))
    assert np.array_equal(np.sort(seen), np.arange(60))


def test_ranks_get_disjoint_batches_of_the_same_global_sequence():
    single = ClassBalancedBatchSampler(LABELS, 6, 2, seed=7, batches_per_epoch=5)
    single.set_epoch(2)
    global_batches = list(single)
    shards = []
    for rank in range(2):
        sampler = ClassBalancedBatchSampler(LABELS, 6, 2, seed=7, num_replicas=2, rank=rank, batches_per_epoch=5)
        sampler.set_epoch(2)
        shards.append(list(sampler))
    assert len(shards[0]) == len(shards[1]) == 2  # the odd fifth batch is dropped for equal steps
    assert shards[0] == global_batches[0:4:2] and shards[1] == global_batches[1:4:2]
    assert not set(np.concatenate(shards[0])) & set(np.concatenate(shards[1]))


def test_sequence_is_fixed_by_seed_and_epoch():
    def epoch(seed, number):
        sampler = ClassBalancedBatchSampler(LABELS, 3, 2, seed=seed)
        sampler.set_epoch(number)
        return list(sampler)

    assert len(epoch(0, 0)) == 10
    assert epoch(0, 0) == epoch(0, 0)
    assert epoch(0, 0) != epoch(0, 1)
    assert epoch(0, 0) != epoch(1, 0)


def test_unservable_layouts_are_refused():
    with pytest.raises(ValueError, match="only 6 classes"):
        ClassBalancedBatchSampler(LABELS, 7, 2, seed=0)
    with pytest.raises(ValueError, match="fewer instances"):
        ClassBalancedBatchSampler(np.array([0, 0, 0, 1, 1]), 2, 3, seed=0)
    with pytest.raises(ValueError, match="cannot feed 4 replicas"):
        ClassBalancedBatchSampler(LABELS, 2, 2, seed=0, num_replicas=4, rank=0, batches_per_epoch=3)


@pytest.mark.parametrize(("filter_name", "same_first", "same_second"), [("each", True, False), ("same", True, True), ("diff", False, False)])
def test_explicit_batches_lay_out_anchors_then_candidates_per_filter(filter_name, same_first, same_second):
    sampler = ExplicitTripletBatchSampler(LABELS, 5, filter_name, seed=0, batches_per_epoch=3)
    batches = list(sampler)
    assert len(batches) == 3
    for batch in batches:
        anchors, first, second = np.array(batch).reshape(3, 5)
        assert np.all((LABELS[first] == LABELS[anchors]) == same_first)
        assert np.all((LABELS[second] == LABELS[anchors]) == same_second)
        assert np.all((first != anchors) & (second != anchors) & (first != second))


def test_explicit_batches_shard_by_rank_and_repeat_by_epoch():
    single = ExplicitTripletBatchSampler(LABELS, 4, "all", seed=3, batches_per_epoch=6)
    ranks = [ExplicitTripletBatchSampler(LABELS, 4, "all", seed=3, num_replicas=3, rank=r, batches_per_epoch=6) for r in range(3)]
    everything = list(single)
    assert [list(r) for r in ranks] == [everything[r::3] for r in range(3)]
    single.set_epoch(1)
    assert list(single) != everything
    assert len(ExplicitTripletBatchSampler(LABELS, 4, "all", seed=3)) == 60 // 12


def test_explicit_sampler_refuses_data_the_filter_cannot_use():
    with pytest.raises(ValueError, match="at least two classes"):
        ExplicitTripletBatchSampler(np.zeros(10, dtype=int), 2, "diff", seed=0)


def test_shuffled_batches_cover_each_item_at_most_once_and_shard_by_rank():
    from fdsml.data import ShuffledBatchSampler

    single = ShuffledBatchSampler(23, 4, seed=3)
    batches = list(single)
    assert len(batches) == len(single) == 5 and all(len(b) == 4 for b in batches)
    flat = [i for b in batches for i in b]
    assert len(set(flat)) == 20
    ranks = [list(ShuffledBatchSampler(23, 4, seed=3, num_replicas=2, rank=r)) for r in range(2)]
    assert ranks[0] == batches[0:4:2] and ranks[1] == batches[1:4:2]
    single.set_epoch(1)
    assert list(single) != batches


def test_explicit_batches_do_not_rescan_every_label():
    """The pools are built once: a batch over 1M labels costs about what one over 10k does (it was 0.42 s)."""

    def batch_seconds(n_labels):
        sampler = ExplicitTripletBatchSampler(np.arange(n_labels) % 1000, 64, "each", seed=0, batches_per_epoch=4)
        started = time.perf_counter()
        list(sampler)
        return (time.perf_counter() - started) / 4

    small, large = batch_seconds(10_000), batch_seconds(1_000_000)
    assert large < 5 * small + 0.02, (small, large)


def test_one_explicit_triplet_a_batch_is_the_fewest_and_a_small_table_still_gives_one_batch():
    with pytest.raises(ValueError, match="^triplets_per_batch must be positive, got 0$"):
        ExplicitTripletBatchSampler(LABELS, 0, "all", seed=0)
    assert len(ExplicitTripletBatchSampler(LABELS, 1, "all", seed=0)) == len(LABELS) // 3
    assert len(ExplicitTripletBatchSampler(LABELS, len(LABELS), "all", seed=0)) == 1  # fewer images than one batch's 3 T


def test_explicit_batches_of_one_epoch_differ_from_one_another():
    batches = list(ExplicitTripletBatchSampler(LABELS, 4, "all", seed=0, batches_per_epoch=6))
    assert len({tuple(batch) for batch in batches}) == 6


def test_class_balanced_batches_take_one_class_of_one_instance_at_the_least():
    for p, k in ((0, 2), (2, 0)):
        with pytest.raises(ValueError, match=rf"^classes_per_batch and instances_per_class must be positive, got {p}, {k}$"):
            ClassBalancedBatchSampler(LABELS, p, k, seed=0)
    assert len(ClassBalancedBatchSampler(LABELS, 1, 1, seed=0)) == len(LABELS)
    exactly_k = np.array([0, 0, 1, 1])  # every class holds exactly K = 2: servable
    assert len(ClassBalancedBatchSampler(exactly_k, 2, 2, seed=0)) == 1
    with pytest.raises(ValueError, match=r"1 class\(es\) have fewer instances \(e.g. class .*1\) has 1\)$"):
        ClassBalancedBatchSampler(np.array([0, 0, 1, 2, 2]), 2, 2, seed=0)
