"""PA-Triplet: filters, descriptor ordering, batch mining against brute force, the loss by hand."""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from fdsml.losses.pa_triplet import (
    PATripletLoss,
    _uniform_ranks,
    allowed_triplets,
    explicit_indices_tuple,
    mine_batch_triplets,
    mined_triplets,
    triplets_per_anchor,
    without_near_ties,
)
from fdsml.timers import Measured

FILTERS = ("all", "each", "same", "diff")


def _triplets(indices):
    return sorted(zip(*(t.tolist() for t in indices)))


def _brute_force(labels, psi, filter_name, min_relative_gap=0.0):
    """The specification read literally, one triplet at a time (near-ties left out when asked)."""
    labels, psi = labels.tolist(), psi.double().numpy()
    rules = {"all": (None, None), "each": (True, False), "same": (True, True), "diff": (False, False)}[filter_name]

    def allowed(a, c, rule):
        return rule is None or (labels[a] == labels[c]) == rule

    found = []
    for a, c1, c2 in itertools.product(range(len(labels)), repeat=3):
        if len({a, c1, c2}) < 3 or not (allowed(a, c1, rules[0]) and allowed(a, c2, rules[1])):
            continue
        if rules[0] == rules[1] and c1 > c2:
            continue
        d1, d2 = np.linalg.norm(psi[a] - psi[c1]), np.linalg.norm(psi[a] - psi[c2])
        if abs(d1 - d2) < min_relative_gap * max(d1, d2):
            continue
        found.append((a, c1, c2) if d1 <= d2 else (a, c2, c1))
    return sorted(found)


@pytest.fixture
def batch():
    gen = torch.Generator().manual_seed(3)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3])
    psi = torch.randint(-2, 3, (labels.shape[0], 6), generator=gen).float()
    psi[5] = psi[4]  # equal descriptors: ties must go to candidate 1
    return labels, psi


def test_closer_candidate_is_positive_and_candidate_one_wins_ties():
    anchor, near, far = [0.0] * 6, [1.0] + [0.0] * 5, [2.0] + [0.0] * 5
    psi = torch.tensor([anchor, anchor, anchor, near, far, near, far, near, near])
    anchors, positives, negatives = explicit_indices_tuple(psi)
    assert anchors.tolist() == [0, 1, 2]
    assert positives.tolist() == [3, 7, 5]  # c1 nearer; c2 nearer; tie -> c1
    assert negatives.tolist() == [6, 4, 8]


@pytest.mark.parametrize("filter_name", FILTERS)
def test_near_ties_are_left_out_only_when_asked(batch, filter_name):
    labels, psi = batch
    every = mine_batch_triplets(labels, psi, filter_name)
    assert without_near_ties(psi, every, 0.0) is every
    decisive = _triplets(without_near_ties(psi, every, 0.3))
    assert decisive == _brute_force(labels, psi, filter_name, min_relative_gap=0.3)
    assert set(decisive) < set(_triplets(every))  # some of every filter's triplets are near-ties


def test_explicit_triplets_lose_their_near_ties_too():
    anchor, near, nearly_as_near, far = [0.0] * 6, [1.0] + [0.0] * 5, [0.0, 1.05] + [0.0] * 4, [2.0] + [0.0] * 5
    psi = torch.tensor([anchor, anchor, near, near, nearly_as_near, far])
    anchors, positives, negatives = without_near_ties(psi, explicit_indices_tuple(psi), 0.1)
    assert (anchors.tolist(), positives.tolist(), negatives.tolist()) == ([1], [3], [5])


def test_explicit_batches_must_hold_three_rows_per_triplet():
    with pytest.raises(ValueError, match="3 x T"):
        explicit_indices_tuple(torch.zeros(4, 6))


@pytest.mark.parametrize("filter_name", FILTERS)
def test_batch_mining_equals_brute_force_enumeration(batch, filter_name):
    labels, psi = batch
    mined = mine_batch_triplets(labels, psi, filter_name)
    assert all(t.dtype == torch.long for t in mined)
    expected = _brute_force(labels, psi, filter_name)
    assert len(expected) > 0
    assert mined[0].shape[0] == len(expected)
    assert _triplets(mined) == expected


@pytest.mark.parametrize(("filter_name", "same_count"), [("each", 1), ("same", 2), ("diff", 0)])
def test_each_filter_draws_from_exactly_the_classes_it_promises(batch, filter_name, same_count):
    labels, psi = batch
    anchors, positives, negatives = mine_batch_triplets(labels, psi, filter_name)
    same = (labels[positives] == labels[anchors]).int() + (labels[negatives] == labels[anchors]).int()
    assert torch.all(same == same_count)
    assert not torch.any((positives == anchors) | (negatives == anchors) | (positives == negatives))


def test_all_filter_takes_every_unordered_pair_of_other_items(batch):
    labels, psi = batch
    anchors, positives, negatives = mine_batch_triplets(labels, psi, "all")
    size = labels.shape[0]
    assert anchors.shape[0] == size * math.comb(size - 1, 2)
    pairs = {(a, min(p, n), max(p, n)) for a, p, n in _triplets((anchors, positives, negatives))}
    assert len(pairs) == anchors.shape[0]


@pytest.mark.parametrize("filter_name", FILTERS)
def test_triplets_per_anchor_counts_a_class_balanced_batch(filter_name):
    labels = torch.arange(4).repeat_interleave(3)  # P = 4 classes x K = 3
    mined = mine_batch_triplets(labels, torch.randn(12, 6), filter_name)
    assert mined[0].shape[0] == 12 * triplets_per_anchor(filter_name, 4, 3)
    assert torch.all(torch.bincount(mined[0], minlength=12) == triplets_per_anchor(filter_name, 4, 3))


@pytest.mark.parametrize(("filter_name", "count"), [("same", 12 * 1), ("each", 12 * 2 * 9), ("diff", 12 * 36), ("all", 12 * 55)])
def test_mined_triplets_counts_every_anchors_candidate_pairs_in_a_batch(filter_name, count):
    """P = 4 x K = 3: per anchor 2 same-class and 9 other-class candidates; pairs by the filter's rules, worked by hand."""
    labels = torch.arange(4).repeat_interleave(3)
    assert mined_triplets(filter_name, 4, 3) == count == mine_batch_triplets(labels, torch.randn(12, 6), filter_name)[0].shape[0]


@pytest.mark.parametrize(("filter_name", "classes", "instances"), [("same", 8, 2), ("each", 1, 8), ("each", 8, 1), ("diff", 2, 1)])
def test_batches_too_small_for_the_filter_are_refused(filter_name, classes, instances):
    with pytest.raises(ValueError, match=f"filter '{filter_name}' finds no triplet"):
        triplets_per_anchor(filter_name, classes, instances)


def test_subsampling_is_a_reproducible_subset(batch):
    labels, psi = batch
    full = set(_triplets(mine_batch_triplets(labels, psi, "all")))
    draws = [
        _triplets(mine_batch_triplets(labels, psi, "all", max_triplets=20, generator=torch.Generator().manual_seed(seed)))
        for seed in (0, 0, 1)
    ]
    assert len(draws[0]) == 20 and set(draws[0]) <= full
    assert draws[0] == draws[1] != draws[2]
    with pytest.raises(ValueError, match="torch.Generator"):
        mine_batch_triplets(labels, psi, "all", max_triplets=20)


SKEWED_LABELS = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2])  # anchors allow unequal numbers of triplets


@pytest.mark.parametrize(("filter_name", "fraction"), [("all", 0.25), ("each", 0.25), ("same", 0.25), ("diff", 0.6)])
def test_subsampling_is_uniform_over_the_allowed_triplets(filter_name, fraction):
    """Each allowed triplet is kept equally often (chi-square), every draw is exact and in order."""
    psi = torch.zeros(SKEWED_LABELS.shape[0], 6)  # all ties: positives stay candidate 1, order is visible
    allowed = _triplets(mine_batch_triplets(SKEWED_LABELS, psi, filter_name))
    count = max(1, int(fraction * len(allowed)))
    generator = torch.Generator().manual_seed(7)
    frequency = dict.fromkeys(allowed, 0)
    trials = 600
    for _ in range(trials):
        mined = mine_batch_triplets(SKEWED_LABELS, psi, filter_name, max_triplets=count, generator=generator)
        drawn = list(zip(*(t.tolist() for t in mined)))
        assert len(drawn) == count and drawn == sorted(set(drawn))
        for triplet in drawn:
            frequency[triplet] += 1  # KeyError for a triplet the filter does not allow
    observed = np.array(list(frequency.values()))
    assert stats.chisquare(observed).pvalue > 1e-3


def test_subsampling_a_large_batch_never_builds_the_triplet_cube():
    labels = torch.arange(256).repeat_interleave(4)  # B = 1,024: 5e8 triplets for "all", 12 GB as index triples
    with Measured() as measured:
        generator = torch.Generator().manual_seed(0)
        anchors, _, _ = mine_batch_triplets(labels, torch.randn(1024, 6), "all", max_triplets=5000, generator=generator)
    assert anchors.shape[0] == 5000
    if measured.peak_bytes is not None:
        assert measured.peak_bytes < 100 * 2**20


def test_unknown_filter_is_refused(batch):
    with pytest.raises(ValueError, match="unknown candidate filter 'some'"):
        mine_batch_triplets(*batch, "some")


EMBEDDINGS = torch.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0], [0.0, 2.0]])
TRIPLETS = (torch.tensor([0, 0, 2]), torch.tensor([2, 1, 3]), torch.tensor([1, 3, 0]))


def test_loss_equals_hand_computation_without_normalisation():
    # d(0,2)=1, d(0,1)=5, d(0,3)=2, d(2,3)=sqrt(5), d(2,0)=1; margin 0.5
    hinge = [max(0.0, 1 - 5 + 0.5), max(0.0, 5 - 2 + 0.5), max(0.0, math.sqrt(5) - 1 + 0.5)]
    mean_loss, parts = PATripletLoss(margin=0.5, normalize_embeddings=False, reducer="mean")(EMBEDDINGS, TRIPLETS)
    assert mean_loss.item() == pytest.approx(sum(hinge) / 3)
    assert parts["triplets"] == 3 and parts["nonzero_fraction"].item() == pytest.approx(2 / 3)
    assert parts["triplet_accuracy"].item() == pytest.approx(1 / 3)  # only d(0,2) = 1 < d(0,1) = 5 is ordered
    swapped = (TRIPLETS[0], TRIPLETS[2], TRIPLETS[1])  # scored apart from the loss's triplets: the other two ordered
    _, scored_apart = PATripletLoss(margin=0.5, normalize_embeddings=False)(EMBEDDINGS, TRIPLETS, scored=swapped)
    assert scored_apart["triplets"] == 3 and scored_apart["triplet_accuracy"].item() == pytest.approx(2 / 3)
    nonzero_loss, _ = PATripletLoss(margin=0.5, normalize_embeddings=False, reducer="avg_nonzero")(EMBEDDINGS, TRIPLETS)
    assert nonzero_loss.item() == pytest.approx(sum(hinge) / 2)


def test_loss_on_normalised_embeddings_and_its_gradient():
    embeddings = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]], requires_grad=True)
    # unit vectors (1,0), (0,1), (-1,0): d(a,p) = sqrt 2, d(a,n) = 2
    loss, _ = PATripletLoss(margin=1.0)(embeddings, (torch.tensor([0]), torch.tensor([1]), torch.tensor([2])))
    assert loss.item() == pytest.approx(math.sqrt(2) - 2 + 1.0)
    loss.backward()
    assert embeddings.grad.abs().sum() > 0


def test_no_triplets_gives_a_zero_loss_still_attached_to_the_graph():
    embeddings = torch.randn(3, 4, requires_grad=True)
    empty = tuple(torch.empty(0, dtype=torch.long) for _ in range(3))
    loss, parts = PATripletLoss()(embeddings, empty)
    assert loss.item() == 0 and loss.requires_grad and parts["triplets"] == 0
    _, scored = PATripletLoss(normalize_embeddings=False)(EMBEDDINGS, empty, scored=TRIPLETS)  # every triplet a near-tie
    assert scored["triplets"] == 0 and scored["triplet_accuracy"].item() == pytest.approx(1 / 3)


def test_bad_loss_settings_are_refused():
    with pytest.raises(ValueError, match="unknown reducer"):
        PATripletLoss(reducer="sum")
    with pytest.raises(ValueError, match="margin"):
        PATripletLoss(margin=-0.1)



def test_every_triplet_rank_is_built_on_the_labels_device_not_copied_from_the_cpu():
    """PA-Triplet's per-step ranks: on a GPU a CPU-built ``arange`` is a host-to-device copy every step."""
    elsewhere = torch.device("meta")  # any device but the CPU
    assert _uniform_ranks(10, None, None, elsewhere).device == elsewhere
    assert _uniform_ranks(10, 20, None, elsewhere).device == elsewhere


def test_a_subset_of_triplet_ranks_comes_from_the_generator_alone():
    """The same generator seed draws the same ranks whatever the global seed; another seed other ranks."""
    def drawn(total: int, count: int, seed: int, global_seed: int) -> torch.Tensor:
        torch.manual_seed(global_seed)
        return _uniform_ranks(total, count, torch.Generator().manual_seed(seed), torch.device("cpu"))

    for total, count in [(30, 20), (1000, 20)]:  # a permutation's prefix, and rejection of repeated draws
        ranks = drawn(total, count, seed=3, global_seed=0)
        assert ranks.shape == (count,) and ranks.unique().numel() == count and bool((ranks.diff() > 0).all())
        torch.testing.assert_close(drawn(total, count, seed=3, global_seed=1), ranks, rtol=0, atol=0)
        assert not torch.equal(drawn(total, count, seed=4, global_seed=0), ranks)


def test_as_many_triplets_asked_as_the_filter_allows_keeps_them_all_without_a_generator():
    labels = torch.tensor([0, 0, 1, 1])
    every = allowed_triplets(labels, "all")
    for kept, whole in zip(allowed_triplets(labels, "all", max_triplets=every[0].numel()), every):
        torch.testing.assert_close(kept, whole, rtol=0, atol=0)
