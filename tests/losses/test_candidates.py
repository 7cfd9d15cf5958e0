"""The explicit sampler's triplets (``TripletPools``, ``sample_explicit_triplets``): which anchors it may draw, where each
candidate comes from under each filter, and the errors when the data cannot serve a filter, on a hand-made table."""

import numpy as np
import pytest

from fdsml.losses.candidates import FILTER_RULES, TripletPools, sample_explicit_triplets

# class 0: items 0, 3, 5, 8 (four); class 1: items 1, 6, 9 (three); class 2: item 2 (one); class 3: items 4, 7 (two)
CLASS_IDS = np.array([0, 1, 2, 0, 3, 0, 1, 3, 0, 1])
ELIGIBLE = {  # a same-class candidate needs one other item of the anchor's class, two same-class candidates two
    "all": list(range(10)),
    "diff": list(range(10)),
    "each": [0, 1, 3, 4, 5, 6, 7, 8, 9],
    "same": [0, 1, 3, 5, 6, 8, 9],
}


@pytest.mark.parametrize("name", FILTER_RULES)
def test_anchors_are_the_items_whose_class_can_serve_the_filter(name):
    pools = TripletPools(CLASS_IDS, name)
    assert pools.eligible.tolist() == ELIGIBLE[name]
    assert {label: pool.tolist() for label, pool in pools.pool_by_class.items()} == {0: [0, 3, 5, 8], 1: [1, 6, 9], 2: [2], 3: [4, 7]}
    anchors, _, _ = pools.sample(2000, np.random.default_rng(0))
    assert set(anchors.tolist()) == set(ELIGIBLE[name])  # every eligible anchor is drawn, no other


@pytest.mark.parametrize("name", FILTER_RULES)
def test_each_candidate_comes_from_where_its_rule_says_and_is_never_the_anchor_or_the_other(name):
    anchors, first, second = sample_explicit_triplets(CLASS_IDS, 2000, name, np.random.default_rng(1))
    assert anchors.shape == first.shape == second.shape == (2000,) and first.dtype == second.dtype == np.int64
    assert ((first != anchors) & (second != anchors) & (first != second)).all()
    assert ((0 <= first) & (first < 10) & (0 <= second) & (second < 10)).all()
    for candidate, same_class in zip((first, second), FILTER_RULES[name]):
        shares = CLASS_IDS[candidate] == CLASS_IDS[anchors]
        if same_class is None:  # anywhere: from the anchor's class about as often as the table's mix makes it
            assert 0.1 < shares.mean() < 0.5
        else:
            assert (shares == same_class).all()


def _drawn(seed: int) -> np.ndarray:
    return np.stack(sample_explicit_triplets(CLASS_IDS, 50, "each", np.random.default_rng(seed)))


def test_the_same_seed_draws_the_same_triplets_and_another_seed_others():
    assert np.array_equal(_drawn(3), _drawn(3))
    assert not np.array_equal(_drawn(3), _drawn(4))


@pytest.mark.parametrize(
    "class_ids, name, message",
    [
        ([0, 0, 1, 1], "same", "filter 'same' needs classes with at least 3 items"),
        ([0, 1, 2], "each", "filter 'each' needs classes with at least 2 items"),
        ([0, 0, 0], "diff", "filter 'diff' needs at least two classes"),
        ([0, 0, 0], "each", "filter 'each' needs at least two classes"),
        ([0, 1], "nearest", "unknown candidate filter 'nearest'; choose one of all, each, same, diff"),
    ],
)
def test_data_that_cannot_serve_the_filter_is_refused_naming_it(class_ids, name, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        TripletPools(np.array(class_ids), name)


def test_a_candidate_that_cannot_be_found_is_an_error_naming_the_anchor():
    """Two items, 'all': the second candidate may be neither the anchor nor the first, and no third item exists."""
    with pytest.raises(ValueError, match=r"^no candidate available for anchor [01] \(class [01]\): too few items or classes"):
        sample_explicit_triplets(np.array([0, 1]), 1, "all", np.random.default_rng(0))
