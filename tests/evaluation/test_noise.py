"""The noise of a figure: binomial standard errors, and differences paired over the same items (and seeds)."""

import math

import numpy as np
import pytest

from fdsml.evaluation.noise import Difference, binomial_se, paired_difference


def test_the_binomial_standard_error_of_a_rate_over_its_items():
    assert binomial_se(0.25, 12) == pytest.approx(math.sqrt(0.25 * 0.75 / 12))
    assert binomial_se(1.0, 40) == 0.0  # every item right: no spread in the items
    assert math.isnan(binomial_se(0.5, 0)) and math.isnan(binomial_se(float("nan"), 10))
    assert binomial_se(0.0, 1) == 0.0 and binomial_se(1.0, 1) == 0.0  # one item: measured, if with no spread


def test_one_seed_differs_item_by_item_from_its_reference():
    hits, reference = np.array([1, 1, 0, 1]), np.array([0, 1, 0, 0])
    # per-item differences 1, 0, 0, 1: mean 0.5, sample std sqrt(1/3), over sqrt(4) items
    found = paired_difference([hits], [reference])
    assert found.value == pytest.approx(0.5) and found.se == pytest.approx(math.sqrt(1 / 3) / 2)


def test_pairing_is_what_makes_a_small_shared_gain_measurable():
    rng = np.random.default_rng(0)
    reference = rng.random(400) < 0.5
    hits = reference.copy()
    hits[np.flatnonzero(~reference)[:20]] = True  # 20 more queries right, none lost: a 5-point gain
    found = paired_difference([hits], [reference])
    unpaired = math.sqrt(binomial_se(hits.mean(), 400) ** 2 + binomial_se(reference.mean(), 400) ** 2)
    assert found.value == pytest.approx(0.05) and found.se < unpaired / 3
    assert found.helped(2.0) and not Difference(0.05, unpaired).helped(2.0)


def test_two_seeds_add_their_spread_to_the_items_noise():
    first, second = np.array([1, 1, 1, 0]), np.array([1, 0, 0, 0])
    reference = np.array([0, 0, 1, 0])
    found = paired_difference([first, second], [reference])
    per_item = np.array([1, 0.5, -0.5, 0])  # each item's difference averaged over the two seeds
    item_se = per_item.std(ddof=1) / 2
    seed_se = np.std([0.5, 0.0], ddof=1) / math.sqrt(2)  # the seeds' differences 0.5 and 0
    assert found.value == pytest.approx(0.25) and found.se == pytest.approx(math.sqrt(item_se**2 + seed_se**2))
    per_seed_reference = paired_difference([first, second], [reference, np.array([1, 1, 1, 0])])
    assert per_seed_reference.value == pytest.approx(((0.75 - 0.25) + (0.25 - 0.75)) / 2)


def test_a_difference_helps_only_beyond_the_noise():
    assert Difference(0.05, 0.02).helped(2.0) and not Difference(0.05, 0.02).helped(3.0)
    assert not Difference(-0.1, 0.01).helped(2.0) and not Difference(0.0, 0.0).helped(2.0)
    assert Difference(0.012, 0.004).describe() == "+1.2 ± 0.4"


def test_mismatched_items_or_seeds_are_refused():
    with pytest.raises(ValueError, match="score the same items"):
        paired_difference([np.ones(3)], [np.ones(4)])
    with pytest.raises(ValueError, match="give one, or one per seed"):
        paired_difference([np.ones(3)] * 3, [np.ones(3)] * 2)


def test_the_edges_of_a_difference_its_record_and_its_text():
    """A gain of exactly the noise threshold is within it; one item has no item spread; the record and the text in any
    scale; a rate a rounding past 1 has no negative variance; no seeds is refused by name."""
    assert not Difference(0.04, 0.02).helped(2.0) and Difference(0.0401, 0.02).helped(2.0)
    assert Difference(0.25, 0.5).as_dict() == {"difference": 0.25, "se": 0.5}
    assert Difference(0.0123, 0.0046).describe(scale=1.0, digits=3) == "+0.012 ± 0.005"
    assert Difference(-0.5, 0.25).describe() == "-50.0 ± 25.0"
    one = paired_difference([np.array([1])], [np.array([0])])
    assert one.value == 1.0 and math.isnan(one.se)
    assert binomial_se(1.0 + 1e-12, 5) == 0.0
    with pytest.raises(ValueError, match="^no scored seed to compare$"):
        paired_difference([], [np.ones(3)])
    with pytest.raises(ValueError, match=r"^hits over \(3,\) items against a reference over \(4,\): score the same items$"):
        paired_difference([np.ones(3)], [np.ones(4)])
    with pytest.raises(ValueError, match="^3 seeds of hits but 2 references: give one, or one per seed$"):
        paired_difference([np.ones(3)] * 3, [np.ones(3)] * 2)
