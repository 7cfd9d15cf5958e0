"""The noise of a measured figure: the binomial standard error of a rate, and the paired difference of two scorers.

Every figure the project reports is a rate over scored items (queries retrieving a match, images
classified, triplets ordered as the descriptor orders them), so its standard error is binomial,
``sqrt(p (1 - p) / n)``. Two scorers of the same items (a fine-tuned model and its frozen trunk, or
raw pixels) differ item by item: their difference is paired, its standard error that of the
per-item differences' mean, and with two or more seeds the seeds' spread is added. A figure whose
gain over a reference is no larger than a few of these standard errors is within noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def binomial_se(rate: float, count: int) -> float:
    """The standard error of a rate measured on ``count`` independent items (NaN without items or rate)."""
    if count < 1 or not math.isfinite(rate):
        return math.nan
    return math.sqrt(max(rate * (1.0 - rate), 0.0) / count)


@dataclass(frozen=True)
class Difference:
    """A scorer's rate minus a reference's on the same items, and the standard error of that difference."""

    value: float
    se: float

    def helped(self, noise_ses: float) -> bool:
        """Whether the gain is more than ``noise_ses`` standard errors above zero (a loss, or a gain within noise: no)."""
        return self.value > noise_ses * self.se

    def describe(self, scale: float = 100.0, digits: int = 1) -> str:
        """``+1.2 ± 0.8`` (in % by default)."""
        return f"{scale * self.value:+.{digits}f} ± {scale * self.se:.{digits}f}"

    def as_dict(self) -> dict[str, float]:
        return {"difference": self.value, "se": self.se}


def paired_difference(hits: Sequence[np.ndarray], reference: Sequence[np.ndarray]) -> Difference:
    """The mean over seeds of ``hits - reference``, item by item, and its standard error.

    ``hits`` holds one 0/1 array per seed over the same items; ``reference`` one per seed too, or a
    single one every seed is compared with (raw pixels, a pre-trained trunk). The standard error
    adds the items' part (each item's difference averaged over the seeds: the test set as a sample)
    and, with two or more seeds, the seeds' part (the per-seed differences' spread over sqrt(seeds)).
    """
    if not hits:
        raise ValueError("no scored seed to compare")
    if len(reference) not in (1, len(hits)):
        raise ValueError(f"{len(hits)} seeds of hits but {len(reference)} references: give one, or one per seed")
    pairs = zip(hits, reference if len(reference) == len(hits) else [reference[0]] * len(hits))
    differences = []
    for scored, base in pairs:
        if np.shape(scored) != np.shape(base):
            raise ValueError(f"hits over {np.shape(scored)} items against a reference over {np.shape(base)}: score the same items")
        differences.append(np.asarray(scored, dtype=np.float64) - np.asarray(base, dtype=np.float64))
    per_item = np.mean(differences, axis=0)
    items = len(per_item)
    item_se = float(per_item.std(ddof=1) / math.sqrt(items)) if items > 1 else math.nan
    per_seed = [float(difference.mean()) for difference in differences]
    seed_se = float(np.std(per_seed, ddof=1) / math.sqrt(len(per_seed))) if len(per_seed) > 1 else 0.0
    return Difference(float(per_item.mean()), math.sqrt(item_se**2 + seed_se**2))
