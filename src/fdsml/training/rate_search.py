"""Each starting point's fine-tuning rate, chosen on a validation split of the training data (``<task>.rate_search``).

Starts fine-tune best at different rates (docs/study-results.md, "fine-tuning tuned per start": 3e-4
for the parameter-aware starts, 1e-3 for scratch and FDSL), so a comparison at one shared rate favours
the start that rate suits. The search gives every start the same budget: its recipe at each rate of a
short list, trained on the training split less a validation part and scored on that part; the best
rate (ties: the first listed) fine-tunes the final run on the whole training split. The validation part
is drawn from the training data alone, never from the test split: for retrieval whole training classes
(retrieval tests on unseen classes), for classification images of each training class.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fdsml.config import ConfigError, require_fraction, require_seed
from fdsml.data import ImageRecords
from fdsml.seeds import generator


@dataclass(frozen=True)
class RateSearchSettings:
    """``<task>.rate_search``: the rates tried (``optimizer.base_lr`` values), the fraction of the training data held
    out to choose on, and the seed of that draw."""

    rates: tuple[float, ...] = (3e-4, 1e-3, 3e-3)
    validation_fraction: float = 0.2
    seed: int = 0

    def __post_init__(self):
        if len(self.rates) < 2:
            raise ConfigError(f"rates: give at least two rates to choose from, got {list(self.rates)}")
        if any(not rate > 0 for rate in self.rates) or len(set(self.rates)) != len(self.rates):
            raise ConfigError(f"rates: give distinct positive learning rates, got {list(self.rates)}")
        require_fraction("validation_fraction", self.validation_fraction, inclusive_zero=False)
        if self.validation_fraction >= 1:
            raise ConfigError(f"validation_fraction: must leave training data, got {self.validation_fraction}")
        require_seed("seed", self.seed)


@dataclass(frozen=True)
class RateChoice:
    """A start's chosen rate, every rate's validation metrics, what they were measured on, and the search's seconds."""

    chosen: float
    metric: str
    scores: dict[float, dict[str, float]]
    validation: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """The record the metrics file keeps (rates as text keys: JSON's keys are strings)."""
        return {
            "chosen": self.chosen,
            "metric": self.metric,
            "rates": {f"{rate:g}": metrics for rate, metrics in self.scores.items()},
            "validation": self.validation,
            "seconds": self.seconds,
        }


def choose_rate(
    settings: RateSearchSettings, metric: str, score: Callable[[float], dict[str, float]], validation: str
) -> RateChoice:
    """Score every rate of ``settings`` (``score(rate)``: the validation metrics of a fine-tuning at it) and keep the
    best by ``metric``; on a tie the first listed. ``validation`` says what the scores were measured on."""
    started = time.perf_counter()
    scores = {rate: score(rate) for rate in settings.rates}
    chosen = max(settings.rates, key=lambda rate: scores[rate][metric])
    return RateChoice(chosen, metric, scores, validation, time.perf_counter() - started)


def _chosen(count: int, candidates: np.ndarray, seed: int) -> np.ndarray:
    return np.sort(generator(seed, "rate_search_split").choice(candidates, count, replace=False))


def hold_out_classes(records: ImageRecords, settings: RateSearchSettings, key: str) -> tuple[ImageRecords, ImageRecords]:
    """(training, validation): ``validation_fraction`` of the classes (at least 2), drawn among those of two or more
    images (a query needs another image of its class), held out whole; labels renumbered 0..C-1 in each part.

    Refuses, naming ``key``, a split that cannot give two validation classes and keep one to train."""
    classes, counts = np.unique(records.labels, return_counts=True)
    eligible = classes[counts >= 2]
    wanted = max(2, round(settings.validation_fraction * len(classes)))
    if len(eligible) < 2 or wanted >= len(classes):
        raise ConfigError(
            f"{key}: the {len(classes)} training classes ({len(eligible)} of them with two or more images) cannot give "
            "two validation classes of two images and keep one to train; turn the search off (rate_search: null) and "
            "set each start's base_lr by hand, or add classes"
        )
    held = np.isin(records.labels, _chosen(min(wanted, len(eligible)), eligible, settings.seed))
    return records.subset(~held).with_contiguous_labels(), records.subset(held).with_contiguous_labels()


def hold_out_images(records: ImageRecords, settings: RateSearchSettings, key: str) -> tuple[ImageRecords, ImageRecords]:
    """(training, validation): ``validation_fraction`` of each class's images (at least one, never all), drawn from the
    classes of two or more images; a class of one image keeps it for training. Labels are kept (the same classes).

    Refuses, naming ``key``, a training split where no class has two images."""
    classes, counts = np.unique(records.labels, return_counts=True)
    if counts.max(initial=0) < 2:
        raise ConfigError(
            f"{key}: no training class has two images, so none can lend one to choose the rate on; turn the search "
            "off (rate_search: null) and set each start's base_lr by hand, or add training images"
        )
    rng = generator(settings.seed, "rate_search_split")
    held = np.zeros(len(records), dtype=bool)
    for label, count in zip(classes, counts):
        if count >= 2:
            members = np.flatnonzero(records.labels == label)
            taking = min(max(1, round(settings.validation_fraction * count)), count - 1)
            held[rng.choice(members, taking, replace=False)] = True
    return records.subset(~held), records.subset(held)
