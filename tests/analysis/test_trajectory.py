"""Interpolation trajectories: the path between two codes and how smoothly an embedding follows it."""

import numpy as np
import pytest

from fdsml.analysis.trajectory import (
    interpolated_path,
    pick_code_pair,
    render_path,
    trajectory_smoothness,
)
from fdsml.ifs import is_contractive
from fdsml.ifs.codes import interpolate_codes

from tests.support import UNFILTERED_RENDER, UNFILTERED_SPEC


def test_smoothness_is_the_known_jump_over_the_median_step():
    rng = np.random.default_rng(0)
    directions = rng.normal(size=(40, 16))
    steps = np.full(40, 0.5)
    steps[17] = 4.0  # one jump eight times the regular step
    unit = directions / np.linalg.norm(directions, axis=1, keepdims=True)
    path = np.vstack([np.zeros(16), np.cumsum(unit * steps[:, None], axis=0)])
    assert trajectory_smoothness(path) == pytest.approx(8.0)


def test_an_evenly_paced_path_scores_one_and_the_ratio_ignores_scale():
    line = np.outer(np.linspace(0, 1, 11), [3.0, -4.0])
    assert trajectory_smoothness(line) == pytest.approx(1.0)
    assert trajectory_smoothness(1000 * line) == pytest.approx(1.0)
    assert trajectory_smoothness(np.zeros((5, 3))) == 1.0
    assert trajectory_smoothness(np.array([[0.0], [0.0], [0.0], [1.0]])) == float("inf")
    with pytest.raises(ValueError, match="at least 3"):
        trajectory_smoothness(np.zeros((2, 3)))


def test_interpolation_runs_from_one_code_to_the_other_and_stays_contractive(tiny_unfiltered_table):
    row_0, row_1 = pick_code_pair(tiny_unfiltered_table, UNFILTERED_SPEC.family.interpolation_groups(tiny_unfiltered_table), np.random.default_rng(0))
    assert row_0["n_maps"] == row_1["n_maps"] and row_0["class_id"] != row_1["class_id"]
    code_0, code_1 = (UNFILTERED_SPEC.instance(row).coefficients for row in (row_0, row_1))
    instances = interpolated_path(UNFILTERED_SPEC, row_0, row_1, np.linspace(0, 1, 5))
    codes = np.stack([instance.coefficients for instance in instances])
    np.testing.assert_allclose(codes[0], code_0)
    np.testing.assert_allclose(codes[-1], code_1)
    np.testing.assert_allclose(codes[2], (code_0 + code_1) / 2)
    assert all(is_contractive(code) for code in codes)
    images = render_path(UNFILTERED_SPEC, instances, seed=7)
    assert images.shape == (5, UNFILTERED_RENDER.size, UNFILTERED_RENDER.size) and (images > 0).any(axis=(1, 2)).all()
    with pytest.raises(ValueError, match="different shapes"):
        interpolate_codes(code_0, code_0[:1], [0.5])


def test_without_two_classes_sharing_n_maps_the_pair_comes_from_one_class(tiny_unfiltered_table):
    firsts = tiny_unfiltered_table.groupby("class_id").head(1)
    keep = firsts.drop_duplicates("n_maps")["class_id"]
    table = tiny_unfiltered_table[tiny_unfiltered_table["class_id"].isin(keep)]
    row_0, row_1 = pick_code_pair(table, UNFILTERED_SPEC.family.interpolation_groups(table), np.random.default_rng(1))
    assert row_0["class_id"] == row_1["class_id"] and row_0["instance_id"] != row_1["instance_id"]
