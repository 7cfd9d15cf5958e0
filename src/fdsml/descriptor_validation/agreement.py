"""Triplet agreement: does the descriptor order two candidates the way their renderings do? (docs/method.md §6.2)

Triplets are drawn exactly as pre-training draws them (``sample_explicit_triplets``), each
candidate filter in turn. For every triplet the descriptor picks a positive with the
PA-Triplet rule (``first_is_positive`` on d_Psi to the anchor, candidate 1 wins ties) and the
rendered shapes pick one with the same rule on the Chamfer distance D to the anchor. The
agreement is the fraction of triplets where both pick the same candidate; chance is 50 %.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

from fdsml.families import FamilySpec
from fdsml.ifs.chamfer import chamfer_pairs
from fdsml.ifs.descriptor import descriptor_distance
from fdsml.losses.candidates import FILTERS, first_is_positive, sample_explicit_triplets

SAME_POSITION_GROUPS = ("all_same_position", "candidates_same_position", "candidates_different_positions")
"""How the ``same`` filter's triplets are split: all three perturbed at one coefficient position;
the two candidates at one position and the anchor at another; the candidates at different positions."""


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (stays inside [0, 1], sound near 0 and 1)."""
    if n <= 0:
        raise ValueError("a confidence interval needs at least one trial")
    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # the interval always holds p; min/max only absorb rounding at p = 0 or 1
    return float(max(0.0, min(p, centre - half))), float(min(1.0, max(p, centre + half)))


def measure_triplets(
    table: pd.DataFrame,
    spec: FamilySpec,
    filter_name: str,
    n_triplets: int,
    rng: np.random.Generator,
    chunk_size: int = 256,
) -> pd.DataFrame:
    """Sample ``n_triplets`` triplets of one filter from the family's table and measure them.

    Returns one row per triplet: the table positions of anchor / first / second, their class ids
    (and perturbed positions, for a table with a ``position`` column), d_Psi and D from the anchor
    to each candidate. Renderings use each row's stored seed, as pre-training does.
    """
    return measure_all_filters(table, spec, n_triplets, rng, chunk_size, filters=(filter_name,))


def measure_all_filters(
    table: pd.DataFrame,
    spec: FamilySpec,
    n_triplets: int,
    rng: np.random.Generator,
    chunk_size: int = 256,
    filters: tuple[str, ...] = FILTERS,
) -> pd.DataFrame:
    """``measure_triplets`` for each of ``filters`` (every candidate filter), stacked (column ``filter``).

    Every filter's triplets are drawn first, in filter order, then measured together,
    ``chunk_size`` triplets at a time: a chunk renders each table row it needs once, whichever
    filters and roles need it (at most ``3 * chunk_size`` renderings, or the table's rows if fewer,
    are held at once).
    """
    class_ids = table["class_id"].to_numpy()
    drawn = [sample_explicit_triplets(class_ids, n_triplets, name, rng) for name in filters]
    anchors, first, second = (np.concatenate(role) for role in zip(*drawn))
    chamfer_first, chamfer_second = _chamfer_to_anchor(table, spec, anchors, first, second, chunk_size)
    descriptors = np.stack(table["psi"].to_numpy()).astype(np.float64)
    positions = {}
    if "position" in table.columns:
        position = table["position"].to_numpy()
        positions = {f"{role}_position": position[rows] for role, rows in (("anchor", anchors), ("first", first), ("second", second))}
    return pd.DataFrame(
        {
            "filter": np.repeat(np.asarray(filters, dtype=object), n_triplets),
            "anchor": anchors,
            "first": first,
            "second": second,
            "anchor_class": class_ids[anchors],
            "first_class": class_ids[first],
            "second_class": class_ids[second],
            **positions,
            "psi_distance_first": descriptor_distance(descriptors[anchors], descriptors[first]),
            "psi_distance_second": descriptor_distance(descriptors[anchors], descriptors[second]),
            "chamfer_first": chamfer_first,
            "chamfer_second": chamfer_second,
        }
    )


def _chamfer_to_anchor(
    table: pd.DataFrame, spec: FamilySpec, anchors: np.ndarray, first: np.ndarray, second: np.ndarray, chunk_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """D from each anchor to its first and its second candidate, ``chunk_size`` triplets at a time,
    each row a chunk needs rendered once."""
    chamfer_first = np.empty(anchors.shape[0])
    chamfer_second = np.empty(anchors.shape[0])
    for start in range(0, anchors.shape[0], chunk_size):
        chunk = slice(start, start + chunk_size)
        needed, inverse = np.unique(np.concatenate([anchors[chunk], first[chunk], second[chunk]]), return_inverse=True)
        images = spec.foreground(spec.render_rows(table.iloc[needed]))
        a, f, s = np.split(inverse, 3)
        chamfer_first[chunk] = chamfer_pairs(images, a, f)
        chamfer_second[chunk] = chamfer_pairs(images, a, s)
    return chamfer_first, chamfer_second


def _proportion(hits: np.ndarray) -> dict:
    """Fraction, 95 % Wilson interval and count of a boolean array (fraction None when empty)."""
    n = int(hits.shape[0])
    if n == 0:
        return {"fraction": None, "ci95": None, "n": 0}
    successes = int(np.count_nonzero(hits))
    return {"fraction": successes / n, "ci95": list(wilson_interval(successes, n)), "n": n}


def same_position_group(triplets: pd.DataFrame) -> np.ndarray:
    """Each triplet's ``SAME_POSITION_GROUPS`` label from the perturbed coefficient positions."""
    candidates_same = triplets["first_position"].to_numpy() == triplets["second_position"].to_numpy()
    anchor_same = triplets["anchor_position"].to_numpy() == triplets["first_position"].to_numpy()
    all_same, candidates_only, different = SAME_POSITION_GROUPS
    return np.where(candidates_same & anchor_same, all_same, np.where(candidates_same, candidates_only, different))


def triplet_picks(triplets: pd.DataFrame) -> pd.DataFrame:
    """Per triplet: whether the descriptor, the shapes (D) and the label rule pick candidate 1.

    The label rule (positive = the candidate from the anchor's class) is defined only where
    exactly one candidate shares the anchor's class; elsewhere ``label_first`` is NaN.
    """
    first_same = (triplets["first_class"] == triplets["anchor_class"]).to_numpy()
    second_same = (triplets["second_class"] == triplets["anchor_class"]).to_numpy()
    chamfer_first, chamfer_second = triplets["chamfer_first"].to_numpy(), triplets["chamfer_second"].to_numpy()
    return pd.DataFrame(
        {
            "descriptor_first": first_is_positive(triplets["psi_distance_first"].to_numpy(), triplets["psi_distance_second"].to_numpy()),
            "shape_first": first_is_positive(chamfer_first, chamfer_second),
            "label_first": np.where(first_same != second_same, first_same.astype(float), np.nan),
            "shape_tie": chamfer_first == chamfer_second,
        },
        index=triplets.index,
    )


def summarise_agreement(triplets: pd.DataFrame) -> dict:
    """Agreement per filter with 95 % CI; label rule and same-positive rate; ``same`` split by position.

    Keys: ``agreement``, ``agreement_ci95``, ``n_triplets_per_filter``, ``shape_ties`` (triplets
    whose candidates are equally far in D: the shape rule then picks candidate 1, like the
    descriptor rule), ``label_rule_agreement`` / ``label_rule_agreement_ci95`` and
    ``same_positive_rate`` for every filter whose candidates differ in class membership
    (``each``), and ``same_by_position`` for ``same``.
    """
    picks = triplet_picks(triplets)
    summary: dict = {
        "agreement": {},
        "agreement_ci95": {},
        "n_triplets_per_filter": {},
        "shape_ties": {},
        "label_rule_agreement": {},
        "label_rule_agreement_ci95": {},
        "same_positive_rate": {},
    }
    for name in FILTERS:
        rows = (triplets["filter"] == name).to_numpy()
        if not rows.any():
            continue
        chosen = picks[rows]
        agree = _proportion((chosen["descriptor_first"] == chosen["shape_first"]).to_numpy())
        summary["agreement"][name] = agree["fraction"]
        summary["agreement_ci95"][name] = agree["ci95"]
        summary["n_triplets_per_filter"][name] = agree["n"]
        summary["shape_ties"][name] = int(chosen["shape_tie"].sum())
        labelled = chosen["label_first"].notna().to_numpy()
        if labelled.all():
            label_first = chosen["label_first"].to_numpy() == 1.0
            label = _proportion(label_first == chosen["shape_first"].to_numpy())
            summary["label_rule_agreement"][name] = label["fraction"]
            summary["label_rule_agreement_ci95"][name] = label["ci95"]
            summary["same_positive_rate"][name] = _proportion(label_first == chosen["descriptor_first"].to_numpy())["fraction"]
    same = (triplets["filter"] == "same").to_numpy()
    if same.any() and "anchor_position" in triplets.columns:
        groups = same_position_group(triplets[same])
        agree = (picks["descriptor_first"] == picks["shape_first"]).to_numpy()[same]
        summary["same_by_position"] = {group: _proportion(agree[groups == group]) for group in SAME_POSITION_GROUPS}
    return summary
