"""PA-Triplet: triplets ordered by the IFS descriptor, fed to pytorch-metric-learning (docs/method.md §3).

Triplet construction is a miner in spirit: it only produces ``(anchors, positives, negatives)``
indices; :class:`PATripletLoss` scores them with the library's distance and reducers (the
``TripletMarginLoss`` hinge, with a margin that may differ per triplet: :func:`graded_margins`). Two ways
to build the triplets share the filters (``FILTER_RULES``) and the ordering
(``first_is_positive``) of :mod:`fdsml.losses.candidates`:

* batch mode, :func:`mine_batch_triplets`: every anchor of a batch with every candidate pair
  of the batch the filter allows (each image forwarded once, used in many triplets);
* explicit mode, :func:`explicit_indices_tuple`: the batch is ``[anchors | first | second]``
  as drawn by ``sample_explicit_triplets`` (three images per triplet).
"""

from __future__ import annotations

from typing import Literal

import torch
from pytorch_metric_learning.distances import LpDistance
from pytorch_metric_learning.reducers import AvgNonZeroReducer, MeanReducer
from torch import nn

from fdsml.ifs.descriptor import descriptor_distance
from fdsml.losses.candidates import check_filter, decisive, first_is_positive
from fdsml.losses.precision import full_precision

IndicesTuple = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
REDUCERS = {"mean": MeanReducer, "avg_nonzero": AvgNonZeroReducer}


def descriptor_distances(psi: torch.Tensor) -> torch.Tensor:
    """All pairwise descriptor distances d_Psi, (B, B), in float64."""
    psi = psi.to(torch.float64)
    return descriptor_distance(psi[:, None, :], psi[None, :, :])


def order_by_descriptor(
    distances: torch.Tensor, anchors: torch.Tensor, first: torch.Tensor, second: torch.Tensor
) -> IndicesTuple:
    """``(anchors, positives, negatives)``: the candidate no farther from the anchor is the positive."""
    keep = first_is_positive(distances[anchors, first], distances[anchors, second])
    return anchors, torch.where(keep, first, second), torch.where(keep, second, first)


def without_near_ties(psi: torch.Tensor, triplets: IndicesTuple, min_relative_gap: float) -> IndicesTuple:
    """``triplets`` whose descriptor tells the positive from the negative: their distances to the anchor
    differ by at least ``min_relative_gap`` of the larger (:func:`fdsml.losses.candidates.decisive`; 0: all)."""
    if min_relative_gap == 0:
        return triplets
    anchors, positives, negatives = triplets
    distances = descriptor_distances(psi)
    kept = decisive(distances[anchors, positives], distances[anchors, negatives], min_relative_gap)
    return anchors[kept], positives[kept], negatives[kept]


def graded_margins(psi: torch.Tensor, triplets: IndicesTuple, margin: float) -> torch.Tensor:
    """Per triplet, ``margin`` x its relative descriptor gap ``(d_an - d_ap) / max(d_ap, d_an)`` (0 where both are 0):
    the full margin where the descriptor puts the negative far beyond the positive, almost none for a near-tie."""
    anchors, positives, negatives = triplets
    distances = descriptor_distances(psi)
    near, far = distances[anchors, positives], distances[anchors, negatives]
    larger = torch.maximum(near, far)
    gap = torch.where(larger > 0, (far - near).abs() / larger.clamp_min(torch.finfo(larger.dtype).tiny), 0.0)
    return (margin * gap).to(torch.float32)


def ordered_fraction(distances: torch.Tensor, triplets: IndicesTuple) -> torch.Tensor:
    """Fraction of ``triplets`` whose positive is strictly nearer the anchor in ``distances`` (B, B), a 0-d tensor."""
    anchors, positives, negatives = triplets
    return (distances[anchors, positives] < distances[anchors, negatives]).float().mean()


def _candidate_pairs(same_class: torch.Tensor, distinct: torch.Tensor, rule: bool | None) -> torch.Tensor:
    """(anchor, candidate) pairs a candidate rule allows: never the anchor itself."""
    if rule is None:
        return distinct
    return distinct & (same_class if rule else ~same_class)


def _pools(allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per anchor (row), its allowed candidates in ascending order (first ``counts[a]`` entries) and their count."""
    order = torch.sort((~allowed).to(torch.uint8), dim=1, stable=True).indices
    return order, allowed.sum(dim=1)


def _unrank_pairs(ranks: torch.Tensor, sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``(i, j)``, i < j, of the pair of lexicographic rank ``ranks`` among ``sizes`` items.

    Row i holds ``sizes - 1 - i`` pairs and starts at ``i (2 sizes - i - 1) / 2``; the float64
    square root finds the row, one integer step either way corrects its rounding.
    """
    width = 2 * sizes - 1
    row = ((width - torch.sqrt((width * width - 8 * ranks).to(torch.float64))) / 2).floor().to(torch.long)

    def start(i):
        return i * (width - i) // 2

    row = row + (start(row + 1) <= ranks).long()
    row = row - (start(row) > ranks).long()
    return row, row + 1 + ranks - start(row)


def _uniform_ranks(total: int, count: int | None, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """Ascending ranks on ``device``: all of ``[0, total)``, or a uniform random subset of ``count`` of them
    (drawn on the generator's device).

    Never materialises ``[0, total)`` when ``count`` is much smaller: distinct draws are collected
    by rejection; the procedure treats every rank alike, so every subset is equally likely.
    """
    if count is None or total <= count:
        return torch.arange(total, device=device)  # built where it is used: no CPU tensor copied every step
    device = generator.device
    if total <= 2 * count:
        return torch.randperm(total, generator=generator, device=device)[:count].sort().values
    chosen = torch.empty(0, dtype=torch.long, device=device)
    while chosen.shape[0] < count:
        missing = count - chosen.shape[0]
        draws = torch.randint(total, (missing + missing // 4 + 16,), generator=generator, device=device)
        chosen = torch.cat([chosen, draws]).unique()
    keep = torch.zeros(chosen.shape[0], dtype=torch.bool, device=device)
    keep[torch.randperm(chosen.shape[0], generator=generator, device=device)[:count]] = True
    return chosen[keep]  # unique() sorted them


def allowed_triplets(
    labels: torch.Tensor, filter_name: str, max_triplets: int | None = None, generator: torch.Generator | None = None
) -> IndicesTuple:
    """``(anchors, candidates 1, candidates 2)`` the filter allows, in lexicographic order.

    Candidates differ from the anchor and from each other. Filters whose two candidates obey the
    same rule (all, same, diff) keep each unordered pair once (candidate 1 has the lower index);
    ``each`` draws its candidates from disjoint pools (same class, other classes). Triplets are
    numbered in lexicographic order and produced from their rank, so memory is O(B^2) for the
    per-anchor pools plus the triplets returned: with ``max_triplets``, a uniform random subset.
    """
    rule_first, rule_second = check_filter(filter_name)
    size = labels.shape[0]
    same_class = labels[:, None] == labels[None, :]
    distinct = ~torch.eye(size, dtype=torch.bool, device=labels.device)
    first_pool, first_count = _pools(_candidate_pairs(same_class, distinct, rule_first))
    if rule_first == rule_second:
        second_pool, counts = first_pool, first_count * (first_count - 1) // 2
    else:
        second_pool, second_count = _pools(_candidate_pairs(same_class, distinct, rule_second))
        counts = first_count * second_count
    ends = counts.cumsum(0)
    ranks = _uniform_ranks(int(ends[-1]) if size else 0, max_triplets, generator, labels.device).to(labels.device)
    anchors = torch.searchsorted(ends, ranks, right=True)
    local = ranks - (ends - counts)[anchors]
    if rule_first == rule_second:
        first, second = _unrank_pairs(local, first_count[anchors])
    else:
        first, second = local // second_count[anchors], local % second_count[anchors]
    return anchors, first_pool[anchors, first], second_pool[anchors, second]


def triplets_per_anchor(filter_name: str, classes_per_batch: int, instances_per_class: int) -> int:
    """How many triplets :func:`mine_batch_triplets` finds per anchor in a P x K class-balanced batch.

    Raises ValueError when the batch is too small for the filter (no triplet at all), so a bad
    configuration fails at start.
    """
    rule_first, rule_second = check_filter(filter_name)
    pools = {True: instances_per_class - 1, False: (classes_per_batch - 1) * instances_per_class}
    pools[None] = pools[True] + pools[False]
    if rule_first == rule_second:
        count = pools[rule_first] * (pools[rule_first] - 1) // 2
    else:
        count = pools[rule_first] * pools[rule_second]
    if count < 1:
        raise ValueError(
            f"filter {filter_name!r} finds no triplet in batches of {classes_per_batch} classes x "
            f"{instances_per_class} instances: add classes or instances per class"
        )
    return count


def mined_triplets(filter_name: str, classes_per_batch: int, instances_per_class: int) -> int:
    """Triplets PA-Triplet's batch mode mines in one P x K batch (every anchor's candidate pairs)."""
    return classes_per_batch * instances_per_class * triplets_per_anchor(filter_name, classes_per_batch, instances_per_class)


def mine_batch_triplets(
    labels: torch.Tensor,
    psi: torch.Tensor,
    filter_name: str,
    *,
    max_triplets: int | None = None,
    generator: torch.Generator | None = None,
) -> IndicesTuple:
    """Batch mode: all triplets of the batch allowed by the filter, ordered by descriptor distance.

    ``labels`` (B,) class ids, ``psi`` (B, D) descriptors (any length D), on the same device. For ``each``,
    candidate 1 is the same-class one. Returns LongTensors ``(anchors, positives, negatives)``
    in (anchor, candidate 1, candidate 2) order; with ``max_triplets`` a uniform random subset of
    that many (drawn with ``generator``, required then, kept in the same order). Memory is O(B^2)
    plus the triplets returned (about B^3 / 2 for ``all``): subsample for batches beyond a few hundred.
    """
    if labels.ndim != 1 or psi.ndim != 2 or psi.shape[0] != labels.shape[0]:
        raise ValueError(f"labels (B,) and psi (B, D) must agree, got {tuple(labels.shape)} and {tuple(psi.shape)}")
    if max_triplets is not None and (max_triplets < 1 or generator is None):
        raise ValueError(f"max_triplets ({max_triplets}) must be positive and come with a torch.Generator")
    anchors, first, second = allowed_triplets(labels, filter_name, max_triplets, generator)
    return order_by_descriptor(descriptor_distances(psi), anchors, first, second)


def explicit_indices_tuple(psi: torch.Tensor) -> IndicesTuple:
    """Explicit mode: ordered triplets of a batch laid out as ``[anchors | first | second]`` (3T rows)."""
    if psi.ndim != 2 or psi.shape[0] % 3:
        raise ValueError(f"explicit batches hold 3 x T images, got psi of shape {tuple(psi.shape)}")
    n_triplets = psi.shape[0] // 3
    anchors = torch.arange(n_triplets, device=psi.device)
    return order_by_descriptor(descriptor_distances(psi), anchors, anchors + n_triplets, anchors + 2 * n_triplets)


class PATripletLoss(nn.Module):
    """Triplet margin loss over PA-Triplet indices: max(0, ||a - p|| - ||a - n|| + margin).

    Defaults (the method leaves them open): embeddings are L2-normalised, so distances lie in
    [0, 2] and the margin has a fixed scale whatever the embedding width or the training stage;
    on that scale 0.2 (FaceNet's value on the unit sphere) asks for a clear gap without being
    unreachable. ``reducer="mean"`` averages over every triplet, the method's loss as written,
    and keeps the loss comparable between batch and explicit modes; ``"avg_nonzero"`` (the
    library's default) averages over violating triplets only and keeps the gradient from fading
    as easy triplets accumulate.
    """

    def __init__(
        self,
        margin: float = 0.2,
        normalize_embeddings: bool = True,
        reducer: Literal["mean", "avg_nonzero"] = "mean",
    ):
        super().__init__()
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        if reducer not in REDUCERS:
            raise ValueError(f"unknown reducer {reducer!r}; choose one of {', '.join(REDUCERS)}")
        self.margin = margin
        self.distance = LpDistance(normalize_embeddings=normalize_embeddings, p=2, power=1)
        self.reducer = REDUCERS[reducer]()

    @full_precision
    def forward(
        self,
        embeddings: torch.Tensor,
        indices_tuple: IndicesTuple,
        scored: IndicesTuple | None = None,
        margins: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict]:
        """The reduced loss over ``indices_tuple`` and its parts; ``margins``: one per triplet (default: ``margin`` for all).

        Parts: ``triplets`` (int); ``triplet_accuracy``, the fraction of the ``scored`` triplets
        (default: ``indices_tuple``) the embedding already orders as the descriptor does (the
        positive strictly closer to the anchor, in the loss's distance); ``nonzero_fraction``, the
        fraction with a non-zero loss; and ``mean_violation`` (detached 0-d tensors, read them with
        ``.item()`` only when logging, to avoid device syncs). Computed in float32 whatever the
        forward pass used, so bf16 does not blur small margins.
        """
        anchors, positives, negatives = indices_tuple
        n_triplets = int(anchors.shape[0])
        distances = self.distance(embeddings)
        margin = self.margin if margins is None else margins
        losses = torch.relu(distances[anchors, positives] - distances[anchors, negatives] + margin) if n_triplets else 0
        loss = self.reducer({"loss": {"losses": losses, "indices": indices_tuple, "reduction_type": "triplet"}}, embeddings, None)
        scored = indices_tuple if scored is None else scored
        zero = embeddings.new_zeros(())
        accuracy = ordered_fraction(distances.detach(), scored) if scored[0].numel() else zero
        if n_triplets == 0:
            return loss, {"triplets": 0, "triplet_accuracy": accuracy, "nonzero_fraction": zero, "mean_violation": zero}
        detached = losses.detach()
        return loss, {
            "triplets": n_triplets,
            "triplet_accuracy": accuracy,
            "nonzero_fraction": (detached > 0).float().mean(),
            "mean_violation": detached.mean(),
        }
