"""PA-Triplet candidate filters and descriptor ordering (docs/method.md §3), shared by all users.

Class labels only restrict where the two candidates come from; the descriptor distance decides
which of them is the positive. ``FILTER_RULES`` is the single statement of the four filters:
for candidate 1 and candidate 2, ``True`` means "from the anchor's class", ``False`` "from
another class" and ``None`` "anywhere". The in-batch miner and the explicit sampler both read it.

In batch mode the batch is the pool the candidates come from, so its class mix is part of the
filter (:func:`needs_class_balance`): a filter with a same-class candidate (``each``, ``same``)
needs P x K class-balanced batches to find any; ``all`` and ``diff`` take plain shuffled
batches, whose class mix is the dataset's, so that a candidate shares the anchor's class (``all``)
and two candidates share a class (``diff``) as often as when drawn from the whole table.
"""

from __future__ import annotations

import numpy as np

FILTER_RULES: dict[str, tuple[bool | None, bool | None]] = {
    "all": (None, None),
    "each": (True, False),
    "same": (True, True),
    "diff": (False, False),
}
FILTERS = tuple(FILTER_RULES)


def check_filter(name: str) -> tuple[bool | None, bool | None]:
    """The rule of filter ``name``; a clear error for an unknown one."""
    if name not in FILTER_RULES:
        raise ValueError(f"unknown candidate filter {name!r}; choose one of {', '.join(FILTERS)}")
    return FILTER_RULES[name]


def needs_class_balance(name: str) -> bool:
    """Whether filter ``name`` mines P x K class-balanced batches (a same-class candidate) rather than
    plain shuffled ones, whose class mix is the dataset's."""
    return True in check_filter(name)


def first_is_positive(d_first, d_second):
    """The PA-Triplet ordering: candidate 1 is the positive when it is no farther (c1 wins ties).

    Works elementwise on NumPy arrays and torch tensors alike.
    """
    return d_first <= d_second


def decisive(d_first, d_second, min_relative_gap: float):
    """Whether the descriptor tells the two candidates apart: their distances to the anchor differ by at
    least ``min_relative_gap`` of the larger one (0: every triplet, the method's definition).

    Works elementwise on NumPy arrays and torch tensors alike.
    """
    gap = abs(d_first - d_second)
    return gap >= min_relative_gap * (d_first + d_second + gap) / 2  # (a + b + |a - b|) / 2 = max(a, b)


def _draw_from(pool_by_class, class_ids, anchors, same_class, exclude, rng):
    """One candidate per anchor from the anchor's class (True), other classes (False) or anywhere (None)."""
    n_items = class_ids.shape[0]
    picks = np.empty(anchors.shape[0], dtype=np.int64)
    for row, anchor in enumerate(anchors):
        label = class_ids[anchor]
        banned = {anchor, *(e[row] for e in exclude)}
        pool = pool_by_class[label] if same_class is True else None
        for _ in range(1000):
            candidate = int(pool[rng.integers(pool.shape[0])]) if pool is not None else int(rng.integers(n_items))
            if candidate in banned:
                continue
            if same_class is False and class_ids[candidate] == label:
                continue
            picks[row] = candidate
            break
        else:
            raise ValueError(f"no candidate available for anchor {anchor} (class {label}): too few items or classes")
    return picks


class TripletPools:
    """What explicit sampling needs from a labelled dataset, built once: eligible anchors, per-class pools.

    Building scans every label (``np.unique``, one pool per class); drawing a batch then touches
    only the drawn items, so a sampler over a million images builds it once, not per batch.
    Raises ValueError when the data cannot serve the filter.
    """

    def __init__(self, class_ids: np.ndarray, filter_name: str):
        self.rule = check_filter(filter_name)
        self.class_ids = np.asarray(class_ids)
        labels, inverse, counts = np.unique(self.class_ids, return_inverse=True, return_counts=True)
        needs_same = sum(r is True for r in self.rule)
        if needs_same and counts.max() < needs_same + 1:
            raise ValueError(f"filter {filter_name!r} needs classes with at least {needs_same + 1} items")
        if any(r is False for r in self.rule) and labels.shape[0] < 2:
            raise ValueError(f"filter {filter_name!r} needs at least two classes")
        self.eligible = np.flatnonzero(counts[inverse] >= needs_same + 1)
        order = np.argsort(inverse, kind="stable")
        self.pool_by_class = dict(zip(labels.tolist(), np.split(order, np.cumsum(counts)[:-1])))

    def sample(self, n_triplets: int, rng: np.random.Generator):
        """``(anchors, first, second)``: candidates are never the anchor and never each other."""
        anchors = self.eligible[rng.integers(self.eligible.shape[0], size=n_triplets)]
        first = _draw_from(self.pool_by_class, self.class_ids, anchors, self.rule[0], (), rng)
        second = _draw_from(self.pool_by_class, self.class_ids, anchors, self.rule[1], (first,), rng)
        return anchors, first, second


def sample_explicit_triplets(class_ids: np.ndarray, n_triplets: int, filter_name: str, rng: np.random.Generator):
    """Anchors and two candidates per the filter, drawn from a labelled dataset (see :class:`TripletPools`).

    Candidates are never the anchor and never each other. Returns ``(anchors, first, second)``.
    """
    return TripletPools(class_ids, filter_name).sample(n_triplets, rng)
