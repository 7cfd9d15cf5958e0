"""Perturbation sweeps: the factor grid, per-point bookkeeping, monotonicity and the summary."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fdsml.families.finefractaldb import FractalClass
from fdsml.ifs.codes import POSITIONS, determinant_probabilities, rescale_coefficient, sample_sigma_factor_code
from fdsml.ifs.descriptor import psi
from fdsml.descriptor_validation.sweeps import (
    base_codes,
    is_monotone,
    noise_floor,
    spearman,
    run_sweeps,
    summarise_sweeps,
    sweep,
    sweep_factors,
    sweep_statistics,
)
from tests.support import UNFILTERED_SPEC


def contractive_code(seed=0):
    return sample_sigma_factor_code(np.random.default_rng(seed), (2, 3), (5.0, 6.0), (-1.0, 1.0))


def test_33_evenly_spaced_factors_with_one_included_exactly():
    factors = sweep_factors((0.6, 1.4), 33)
    assert factors.shape == (33,)
    assert factors[0] == 0.6 and factors[16] == 1.0 and factors[-1] == 1.4
    np.testing.assert_allclose(factors, 0.6 + 0.025 * np.arange(33), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="1.0"):
        sweep_factors((0.6, 1.4), 32)


@pytest.mark.parametrize("n_factors", [4, 32])
def test_a_grid_that_misses_one_is_refused_not_patched(n_factors):
    # an even grid with s = 1 slipped in would no longer be evenly spaced, nor have n_factors points
    with pytest.raises(ValueError, match=f"{n_factors} evenly spaced factors on \\[0.6, 1.4\\] do not include 1.0"):
        sweep_factors((0.6, 1.4), n_factors)


def test_one_is_set_exactly_where_the_even_grid_rounds_next_to_it():
    assert np.linspace(0.35, 1.65, 27)[13] != 1.0  # 0.9999999999999999
    factors = sweep_factors((0.35, 1.65), 27)
    assert factors[13] == 1.0 and factors.shape == (27,)


def test_sweep_recomputes_probabilities_and_is_zero_at_one():
    base = contractive_code(1)
    factors = sweep_factors((0.6, 1.4), 33)
    points = sweep(FractalClass(base, POSITIONS), 0, factors, UNFILTERED_SPEC, seed=7)
    assert len(points) == 33 and (points["position"] == 0).all()
    at_one = points[points["factor"] == 1.0].iloc[0]
    assert at_one["chamfer"] == 0.0 and at_one["psi_distance"] == 0.0
    base_probabilities = determinant_probabilities(base)
    for k in (0, 10, 32):
        code = rescale_coefficient(base, 0, factors[k])
        recomputed = np.linalg.norm(psi(code, determinant_probabilities(code)) - psi(base, base_probabilities))
        stale = np.linalg.norm(psi(code, base_probabilities) - psi(base, base_probabilities))
        assert points["psi_distance"].iloc[k] == pytest.approx(recomputed)
        assert recomputed != pytest.approx(stale)  # rescaling a changes |det|, hence the probabilities
    assert not points["empty"].any()


def test_fresh_seeds_put_noise_at_s_equal_one():
    base = FractalClass(contractive_code(2), POSITIONS)
    factors = sweep_factors((0.6, 1.4), 5)
    fresh = sweep(base, 4, factors, UNFILTERED_SPEC, seed=7, point_seeds=np.arange(100, 105))
    assert fresh.loc[fresh["factor"] == 1.0, "chamfer"].iloc[0] > 0.0


@pytest.mark.parametrize("distances, median", [([0.5, 3.0, 9.0, 1.0, 40.0], 3.0), ([10.0, 1.0, 4.0, 2.0], 3.0)])
def test_the_noise_floor_is_the_median_of_the_re_rendering_distances(monkeypatch, distances, median):
    """Hand-made distances between the base rendering and its re-renderings: the floor is their median, not their
    minimum (which would call sampling noise structure) nor their mean (which one wild rendering would drag)."""
    import fdsml.descriptor_validation.sweeps as sweeps

    renders = []
    family = SimpleNamespace(rescaled=lambda base, position, factor, settings: (base, True))
    spec = SimpleNamespace(family=family, settings=None, foreground=lambda image: image, render=lambda code, seed: renders.append(seed) or np.zeros(2))
    monkeypatch.setattr(sweeps, "chamfer_distances", lambda reference, others: np.array(distances[: len(others)]))
    assert noise_floor("base", spec, 7, np.arange(100, 100 + len(distances))) == median
    assert renders == [7, *range(100, 100 + len(distances))]


def test_monotone_reads_against_the_running_maximum():
    assert is_monotone([0.0, 1.0, 1.0, 2.0])
    assert not is_monotone([0.0, 2.0, 1.9])
    assert is_monotone([0.0, 2.0, 1.9], tolerance=0.2)
    # each step dips less than the tolerance, but together they fall 0.8 below the maximum
    assert not is_monotone([0.0, 2.0, 1.6, 1.2], tolerance=0.5)


def synthetic_points(chamfer_of, contractive=True, base=0, position=0, noise=0.1):
    factors = sweep_factors((0.6, 1.4), 9)
    return pd.DataFrame(
        {
            "base": base,
            "class_id": base,
            "position": position,
            "factor": factors,
            "psi_distance": np.abs(factors - 1.0),
            "chamfer": [chamfer_of(s) for s in factors],
            "contractive": contractive,
            "empty": False,
            "noise_floor": noise,
            "seeding": "common",
        }
    )


def test_statistics_and_summary_on_synthetic_sweeps():
    rising = synthetic_points(lambda s: abs(s - 1.0))
    dip = {1.2: 0.05}  # upper side 0, .1, .05, .3 ...: a dip of .05, inside the noise floor .1
    dipping = synthetic_points(lambda s: dip.get(round(s, 3), abs(s - 1.0)), position=1)
    falling = synthetic_points(lambda s: 1.0 - abs(s - 1.0) if s != 1.0 else 0.0, contractive=False, position=2)
    points = pd.concat([rising, dipping, falling], ignore_index=True)
    stats = sweep_statistics(points).set_index("position")
    assert stats.loc[0, "monotone"] and stats.loc[0, "spearman_lower"] == pytest.approx(1.0)
    assert not stats.loc[1, "monotone_upper"] and stats.loc[1, "monotone_within_noise_upper"] and stats.loc[1, "monotone_lower"]
    assert not stats.loc[2, "monotone_within_noise"]
    summary = summarise_sweeps(points)
    assert summary["n_sweeps"] == 3 and summary["n_contractive"] == 2 and summary["n_factors"] == 9
    assert summary["contractive_fraction"] == pytest.approx(2 / 3)
    assert summary["monotone_fraction_contractive"] == 0.5
    assert summary["monotone_within_noise_fraction_contractive"] == 1.0
    assert summary["monotone_fraction_noncontractive"] == 0.0
    assert summary["n_empty"] == 0 and summary["noise_floor_px_median"] == pytest.approx(0.1)


def test_the_whole_summary_of_two_base_codes_by_hand():
    from scipy.stats import spearmanr

    rising = synthetic_points(lambda s: abs(s - 1.0))
    dipping = synthetic_points(lambda s: {1.2: 0.05}.get(round(s, 3), abs(s - 1.0)), position=1)  # upper Spearman 0.9
    falling = synthetic_points(lambda s: 1.0 - abs(s - 1.0) if s != 1.0 else 0.0, contractive=False, base=1, noise=0.2)
    falling.loc[0, "empty"] = True  # s = 0.6 rendered empty
    points = pd.concat([rising, dipping, falling], ignore_index=True)
    pooled = [spearmanr(p["psi_distance"], p["chamfer"]).statistic for _, p in points.groupby("base")]
    assert summarise_sweeps(points) == {
        "seeding": "common", "n_base_codes": 2, "n_factors": 9, "n_sweeps": 3, "n_contractive": 2,
        "contractive_fraction": pytest.approx(2 / 3), "monotone_fraction_contractive": 0.5,
        "monotone_within_noise_fraction_contractive": 1.0, "median_spearman_contractive": pytest.approx(1.0),
        "n_noncontractive": 1, "monotone_fraction_noncontractive": 0.0, "monotone_within_noise_fraction_noncontractive": 0.0,
        "median_spearman_noncontractive": pytest.approx(0.0, abs=1e-12), "median_spearman_pooled": pytest.approx(np.median(pooled)),
        "n_empty": 1, "n_empty_renderings": 1, "noise_floor_px_median": pytest.approx(0.15),
    }  # fmt: skip
    upper = sweep_statistics(points).set_index(["base", "position"])["spearman_upper"]
    assert upper[(0, 1)] == pytest.approx(0.9) and upper[(1, 0)] == pytest.approx(0.0, abs=1e-12)
    alone = summarise_sweeps(rising)
    assert alone["n_noncontractive"] == 0 and alone["monotone_fraction_noncontractive"] is None
    assert alone["median_spearman_noncontractive"] is None and alone["median_spearman_contractive"] == pytest.approx(1.0)


def test_spearman_is_undefined_on_a_constant_side_or_under_three_finite_pairs():
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert np.isnan(spearman([1, 2, 3], [5, 5, 5])) and np.isnan(spearman([7, 7, 7], [1, 2, 3]))
    assert np.isnan(spearman([1, 2, np.nan, 4], [1, 2, 3, np.nan]))
    assert spearman([1, 2, np.nan, 4, 5], [1, 2, 3, 4, 3]) == pytest.approx(spearman([1, 2, 4, 5], [1, 2, 4, 3]))


def test_run_sweeps_covers_six_coefficients_of_distinct_classes(tiny_unfiltered_table):
    bases, classes = base_codes(tiny_unfiltered_table, UNFILTERED_SPEC, 2, np.random.default_rng(0))
    assert len(set(classes.tolist())) == 2
    factors = sweep_factors((0.6, 1.4), 5)
    points = run_sweeps(bases, classes, factors, UNFILTERED_SPEC, np.random.default_rng(1), n_noise_seeds=2)
    assert len(points) == 2 * 6 * 5
    assert set(points["position"]) == set(range(6)) and (points["seeding"] == "common").all()
    assert (points.loc[points["factor"] == 1.0, "chamfer"] == 0.0).all()
    assert (points["noise_floor"] >= 0).all()
    summary = summarise_sweeps(points)
    assert summary["n_sweeps"] == 12
    with pytest.raises(ValueError, match="classes"):
        base_codes(tiny_unfiltered_table, UNFILTERED_SPEC, 99, np.random.default_rng(0))


def test_fresh_run_sweeps_draw_each_point_its_own_seed_and_keep_each_base_class(tiny_unfiltered_table, monkeypatch):
    import fdsml.descriptor_validation.sweeps as sweeps

    bases, classes = base_codes(tiny_unfiltered_table, UNFILTERED_SPEC, 2, np.random.default_rng(0))
    factors = sweep_factors((0.6, 1.4), 3)
    floors, point_seeds = [], []
    monkeypatch.setattr(sweeps, "noise_floor", lambda base, spec, seed, others: floors.append((seed, list(others))) or 0.5)
    sweep_of = sweeps.sweep
    monkeypatch.setattr(sweeps, "sweep", lambda *args: point_seeds.append(args[5]) or sweep_of(*args))
    points = run_sweeps(bases, classes, factors, UNFILTERED_SPEC, np.random.default_rng(1), n_noise_seeds=2, common_random_numbers=False)
    drawn = np.random.default_rng(1).integers(sweeps.SEED_LIMIT, size=(2, 1 + 2 + 6 * 3))
    assert floors == [(int(row[0]), list(row[1:3])) for row in drawn]
    assert [list(seeds) for seeds in point_seeds] == [list(row[3 + 3 * p : 6 + 3 * p]) for row in drawn for p in range(6)]
    assert (points["seeding"] == "fresh").all() and points.index.tolist() == list(range(2 * 6 * 3))
    assert points.groupby("base")["class_id"].first().tolist() == classes.tolist() and (points["noise_floor"] == 0.5).all()


def test_a_sweep_is_monotone_within_noise_only_when_both_sides_are():
    one_sided = synthetic_points(lambda s: abs(s - 1.0) if s <= 1.0 else 0.5 - abs(s - 1.0), noise=0.05)
    row = sweep_statistics(one_sided).iloc[0]
    assert row["monotone_within_noise_lower"] and not row["monotone_within_noise_upper"] and not row["monotone_within_noise"]
    assert row["monotone_lower"] and not row["monotone"]


def test_the_smallest_cases_of_monotone_spearman_and_base_codes(tiny_unfiltered_table):
    assert is_monotone([5.0]) and is_monotone([0.0, 1.0]) and not is_monotone([1.0, 0.0])
    assert spearman([0.0, 0.5, 1.0], [0.0, 1.0, 0.5]) == pytest.approx(0.5)  # three pairs, each side spanning exactly 1
    _, classes = base_codes(tiny_unfiltered_table, UNFILTERED_SPEC, 4, np.random.default_rng(0))
    assert classes.tolist() == sorted(set(tiny_unfiltered_table["class_id"]))  # every class once
