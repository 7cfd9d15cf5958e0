"""Triplet agreement: Wilson intervals, the pick rules, and measured cases with known answers."""

import numpy as np
import pandas as pd
import pytest

from fdsml.ifs.chamfer import chamfer_distance
from fdsml.ifs.finefractaldb import instance_code
from fdsml.losses.candidates import FILTERS
from fdsml.descriptor_validation.agreement import (
    SAME_POSITION_GROUPS,
    measure_all_filters,
    measure_triplets,
    summarise_agreement,
    wilson_interval,
)
from tests.support import UNFILTERED_RENDER, UNFILTERED_SPEC


def test_wilson_interval_hand_values():
    low, high = wilson_interval(50, 100)
    assert (low, high) == pytest.approx((0.40383, 0.59617), abs=1e-5)
    low, high = wilson_interval(0, 100)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(1.95996**2 / (100 + 1.95996**2), abs=1e-5)


def test_default_triplet_count_gives_three_points_or_less():
    low, high = wilson_interval(550, 1100)
    assert (high - low) / 2 <= 0.03


def synthetic(filter_name, descriptor_first, shape_first, first_same=True, second_same=False, positions=(0, 0, 0)):
    """Triplets whose descriptor / shape choices are given: the chosen candidate is at 1, the other at 2."""
    descriptor_first = np.asarray(descriptor_first)
    shape_first = np.asarray(shape_first)
    n = descriptor_first.shape[0]
    positions = np.broadcast_to(np.asarray(positions), (n, 3))
    return pd.DataFrame(
        {
            "filter": filter_name,
            "anchor": 0,
            "first": 1,
            "second": 2,
            "anchor_class": 0,
            "first_class": 0 if first_same else 1,
            "second_class": 0 if second_same else 2,
            "anchor_position": positions[:, 0],
            "first_position": positions[:, 1],
            "second_position": positions[:, 2],
            "psi_distance_first": np.where(descriptor_first, 1.0, 2.0),
            "psi_distance_second": np.where(descriptor_first, 2.0, 1.0),
            "chamfer_first": np.where(shape_first, 3.0, 4.0),
            "chamfer_second": np.where(shape_first, 4.0, 3.0),
        }
    )


def test_agreement_label_rule_and_same_positive_rate_on_known_choices():
    # descriptor picks candidate 1 in 6 of 10, shapes in 8 of 10: they agree on rows 0-5 and 8-9
    each = synthetic("each", [True] * 6 + [False] * 4, [True] * 8 + [False] * 2)
    everything = synthetic("all", [True] * 10, [True] * 7 + [False] * 3, first_same=False)
    summary = summarise_agreement(pd.concat([each, everything], ignore_index=True))
    assert summary["agreement"] == {"each": pytest.approx(0.8), "all": pytest.approx(0.7)}
    assert summary["agreement_ci95"]["all"] == pytest.approx(list(wilson_interval(7, 10)))
    assert summary["label_rule_agreement"] == {"each": pytest.approx(0.8)}
    assert summary["same_positive_rate"] == {"each": pytest.approx(0.6)}
    assert summary["n_triplets_per_filter"] == {"each": 10, "all": 10}


def test_ties_follow_the_pa_triplet_rule_candidate_one_wins():
    tied = synthetic("diff", [True, True], [True, True], first_same=False)
    tied[["psi_distance_first", "psi_distance_second", "chamfer_first", "chamfer_second"]] = 1.0
    summary = summarise_agreement(tied)
    assert summary["agreement"]["diff"] == 1.0
    assert summary["shape_ties"]["diff"] == 2


def test_same_filter_is_split_by_coefficient_position():
    rows = [
        synthetic("same", [True] * 4, [True] * 4, second_same=True, positions=(2, 2, 2)),
        synthetic("same", [True] * 2, [False] * 2, second_same=True, positions=(1, 3, 3)),
        synthetic("same", [True] * 4, [True, True, True, False], second_same=True, positions=(1, 1, 5)),
    ]
    summary = summarise_agreement(pd.concat(rows, ignore_index=True))
    split = summary["same_by_position"]
    assert list(split) == list(SAME_POSITION_GROUPS)
    assert split["all_same_position"]["fraction"] == 1.0 and split["all_same_position"]["n"] == 4
    assert split["candidates_same_position"]["fraction"] == 0.0 and split["candidates_same_position"]["n"] == 2
    assert split["candidates_different_positions"]["fraction"] == pytest.approx(0.75)
    assert summary["agreement"]["same"] == pytest.approx(7 / 10)
    assert "same" not in summary["label_rule_agreement"]


def test_measured_distances_are_those_of_the_rendered_rows(tiny_unfiltered_table):
    triplets = measure_triplets(tiny_unfiltered_table, UNFILTERED_SPEC, "all", 12, np.random.default_rng(0), chunk_size=5)
    for _, t in triplets.head(6).iterrows():
        rows = [tiny_unfiltered_table.iloc[int(t[k])] for k in ("anchor", "first", "second")]
        images = [UNFILTERED_RENDER.render(*instance_code(row), int(row["seed"])) for row in rows]
        assert t["chamfer_first"] == pytest.approx(chamfer_distance(images[0], images[1]))
        assert t["chamfer_second"] == pytest.approx(chamfer_distance(images[0], images[2]))
        psi = np.stack(tiny_unfiltered_table["psi"].to_numpy())
        assert t["psi_distance_first"] == pytest.approx(np.linalg.norm(psi[int(t["anchor"])] - psi[int(t["first"])]))


def test_every_filter_measured_together_renders_each_row_once_with_the_per_filter_results(tiny_unfiltered_table, monkeypatch):
    """Stacked filters share a chunk's renderings: each needed row renders once (per filter, the rows
    two filters share rendered twice), and every triplet keeps the distances it has alone."""
    alone = pd.concat(
        [measure_triplets(tiny_unfiltered_table, UNFILTERED_SPEC, name, 30, rng, chunk_size=30) for rng in [np.random.default_rng(2)] for name in FILTERS],
        ignore_index=True,
    )
    rendered = []
    original = type(UNFILTERED_SPEC.family).render
    monkeypatch.setattr(type(UNFILTERED_SPEC.family), "render", lambda self, instance, settings, seed: rendered.append(seed) or original(self, instance, settings, seed))
    together = measure_all_filters(tiny_unfiltered_table, UNFILTERED_SPEC, 30, np.random.default_rng(2), chunk_size=4 * 30)
    pd.testing.assert_frame_equal(together, alone)
    needed = np.unique(together[["anchor", "first", "second"]].to_numpy())
    assert len(rendered) == len(needed) == len(set(rendered))


def test_known_answer_when_every_instance_of_a_class_is_its_anchor(tiny_unfiltered_table):
    """Classes whose instances are all the same code and seed: the same-class candidate is the anchor's
    twin (d_Psi = 0, D = 0), so for `each` descriptor, label rule and shapes all pick it, and for
    `same` both candidates tie at zero in both measures."""
    twins = tiny_unfiltered_table.groupby("class_id").head(1).set_index("class_id").loc[tiny_unfiltered_table["class_id"]].reset_index()
    triplets = measure_all_filters(twins, UNFILTERED_SPEC, 40, np.random.default_rng(1))
    summary = summarise_agreement(triplets)
    assert summary["agreement"]["each"] == 1.0
    assert summary["label_rule_agreement"]["each"] == 1.0
    assert summary["same_positive_rate"]["each"] == 1.0
    assert summary["agreement"]["same"] == 1.0 and summary["shape_ties"]["same"] == 40
    each = triplets[triplets["filter"] == "each"]
    assert (each["first_class"] == each["anchor_class"]).all() and (each["second_class"] != each["anchor_class"]).all()
    assert (each["chamfer_first"] == 0).all() and (each["chamfer_second"] > 0).all()
