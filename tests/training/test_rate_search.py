"""Choosing a start's fine-tuning rate: the best by the metric, on data held out of the training split alone."""

import numpy as np
import pytest

from fdsml.config import ConfigError
from fdsml.data import ImageRecords
from fdsml.training.rate_search import RateSearchSettings, choose_rate, hold_out_classes, hold_out_images


def _records(per_class: list[int]) -> ImageRecords:
    """Class ids 0, 10, 20, ... (not contiguous, as a split's), image i holding the value i to trace rows back."""
    labels = np.repeat(np.arange(len(per_class)) * 10, per_class)
    return ImageRecords(labels=labels, images=np.arange(len(labels), dtype=np.uint8)[:, None, None] * np.ones((1, 2, 2), np.uint8))


def _original_classes(records: ImageRecords, part: ImageRecords) -> set[int]:
    return set(records.labels[part.images[:, 0, 0]].tolist())


def test_the_best_rate_by_the_metric_is_chosen_and_a_tie_goes_to_the_first_listed():
    settings = RateSearchSettings(rates=(3e-4, 1e-3, 3e-3))
    scores = {3e-4: {"map@r": 0.30, "recall@1": 0.9}, 1e-3: {"map@r": 0.41, "recall@1": 0.8}, 3e-3: {"map@r": 0.41, "recall@1": 0.7}}
    asked = []
    choice = choose_rate(settings, "map@r", lambda rate: asked.append(rate) or scores[rate], "somewhere")
    assert asked == [3e-4, 1e-3, 3e-3] and choice.chosen == 1e-3 and choice.seconds >= 0
    assert choose_rate(settings, "recall@1", scores.get, "somewhere").chosen == 3e-4
    assert choice.as_dict()["rates"] == {"0.0003": scores[3e-4], "0.001": scores[1e-3], "0.003": scores[3e-3]}


def test_retrieval_holds_out_whole_training_classes_of_two_images_or_more():
    records = _records([5, 1, 3, 4, 2, 6, 3, 1, 2, 4])
    settings = RateSearchSettings(validation_fraction=0.3)
    train, validation = hold_out_classes(records, settings, "retrieval.rate_search")
    held, kept = _original_classes(records, validation), _original_classes(records, train)
    assert len(held) == 3 and not held & kept and held | kept == set(records.labels.tolist())  # 30 % of 10 classes, whole
    assert {10, 70} <= kept  # the classes of one image: a query with nothing to find never validates
    assert len(train) + len(validation) == len(records)
    assert set(train.labels.tolist()) == set(range(7))  # renumbered 0..C-1 for the proxies
    assert _original_classes(records, hold_out_classes(records, settings, "retrieval.rate_search")[1]) == held  # seeded
    other = [_original_classes(records, hold_out_classes(records, RateSearchSettings(validation_fraction=0.3, seed=s), "k")[1]) for s in range(1, 6)]
    assert any(found != held for found in other)


def test_retrieval_refuses_a_split_too_small_to_hold_two_validation_classes_out():
    with pytest.raises(ConfigError, match=r"retrieval.rate_search: the 3 training classes \(1 of them with two or more images\)"):
        hold_out_classes(_records([3, 1, 1]), RateSearchSettings(), "retrieval.rate_search")
    with pytest.raises(ConfigError, match="rate_search: null"):
        hold_out_classes(_records([2, 2]), RateSearchSettings(), "retrieval.rate_search")  # nothing left to train


def test_classification_holds_out_images_of_each_class_and_keeps_one_to_train():
    records = _records([10, 1, 2, 5])
    train, validation = hold_out_images(records, RateSearchSettings(validation_fraction=0.2), "classification.rate_search")
    held = {label: int((validation.labels == label).sum()) for label in (0, 10, 20, 30)}
    assert held == {0: 2, 10: 0, 20: 1, 30: 1}  # 20 % rounded, at least one, never a class's last image
    assert set(train.labels) == {0, 10, 20, 30} and len(train) + len(validation) == len(records)
    with pytest.raises(ConfigError, match="no training class has two images"):
        hold_out_images(_records([1, 1, 1]), RateSearchSettings(), "classification.rate_search")


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"rates": (1e-3,)}, "at least two rates"),
        ({"rates": (1e-3, 1e-3)}, "distinct positive"),
        ({"rates": (1e-3, -1.0)}, "distinct positive"),
        ({"validation_fraction": 1.0}, "must leave training data"),
        ({"validation_fraction": 0.0}, r"must lie in \(0, 1\]"),
    ],
)
def test_impossible_search_settings_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        RateSearchSettings(**settings)
