"""Every axis of a trend added: the gap at a target no axis reached and where it would close, checked by hand."""

import math

import pytest
import yaml

from fdsml.config import ConfigError, parse
from fdsml.tuning.study_file import StudyDefinition, read_study
from fdsml.tuning.study_projection import projection_json, projection_markdown, projections
from fdsml.tuning.study_table import satterthwaite
from fdsml.tuning.study_trend import t95, trend_results

FILE = {
    "title": "t", "question": "q", "env": "fair", "steps": ["pretrain", "frozen_probe"],
    "arms": {"fdsl": {}, "fdsl_a4": {}, "fdsl_b2": {}, "same": {}, "same_a4": {}, "same_b2": {}},
    "seeds": {"pretrain.train.seed": [1, 2]},
    "table": {"metrics": ["frozen.recall@1"]},
    "trend": {
        "metrics": ["frozen.recall@1"], "reference": "fdsl", "rivals": ["same"], "spread": "pretrain.train.seed",
        "axes": {"steps": {"label": "steps", "points": {"base": 1, "a4": 4}}, "size": {"label": "pixels", "points": {"base": 1, "b2": 2}}},
        "projection": {"label": "far away", "target": {"steps": 16, "size": 2}, "solve_for": "steps"},
    },
}
STUDY = parse(StudyDefinition, FILE, "study")


def unit(arm, seed, value):
    return {"arm": arm, "seeds": {"pretrain.train.seed": seed}, "metrics": {"frozen.recall@1": value}}


def results(spread, gaps=None):
    """fdsl - same is 4 points at the base, 0 at a4 (two doublings of steps) and 6 at b2 (one doubling of size); fdsl's
    two seeds lie ``spread`` either side of its mean and same's agree, so each gap's SE is ``spread``."""
    gaps = gaps or {"": 0.04, "_a4": 0.0, "_b2": 0.06}
    found = []
    for suffix, gap in gaps.items():
        found += [unit(f"same{suffix}", 1, 0.4), unit(f"same{suffix}", 2, 0.4)]
        found += [unit(f"fdsl{suffix}", 1, 0.4 + gap - spread), unit(f"fdsl{suffix}", 2, 0.4 + gap + spread)]
    return found


def test_the_gap_at_the_target_and_where_it_closes_by_hand():
    # level c, slopes s (steps) and z (size): c = g0, s = (gA - g0) / 2, z = gB - g0. At steps 16 (4 doublings) and
    # size 2 (1): c + 4 s + z = -2 g0 + 2 gA + gB = -8 + 0 + 6 = -2 points, its variance (4 + 4 + 1) SE^2.
    spread = 0.001  # each fdsl pair's std 0.001 * sqrt(2): each gap's SE 0.001 on one degree of freedom
    found = projections(trend_results(results(spread), STUDY), STUDY)["frozen.recall@1"]
    assert found.gap == pytest.approx(-0.02) and found.se == pytest.approx(3 * spread)
    assert found.df == pytest.approx((9e-6) ** 2 / (2 * (4e-6) ** 2 + (1e-6) ** 2))  # Welch-Satterthwaite over the three parts
    assert found.beyond == pytest.approx({"steps": 2.0, "size": 0.0})  # 16 is two doublings past 4; size 2 was measured
    # with size at the target, along steps: level gB = 6 at the base, slope -2 a doubling: closes at 2^3 = 8 steps
    at, low, high = found.crossing
    assert at == pytest.approx(8.0)
    # Fieller: (0.06 - 0.02 t)^2 <= q^2 (1e-6 + 0.5e-6 t^2) (level and slope share no point), q at one degree of freedom
    q = t95(1)
    a, b, c = 4e-4 - q**2 * 0.5e-6, -2 * 0.06 * 0.02, 0.06**2 - q**2 * 1e-6
    roots = sorted(((-b - math.sqrt(b * b - 4 * a * c)) / (2 * a), (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)))
    assert (low, high) == pytest.approx((2 ** roots[0], 2 ** roots[1]), rel=1e-6)


def test_a_slope_that_cannot_be_told_from_flat_leaves_the_closing_value_unbounded():
    found = projections(trend_results(results(0.01), STUDY), STUDY)["frozen.recall@1"]
    at, low, high = found.crossing
    assert at == pytest.approx(8.0) and (low, high) == (None, None)
    assert "8 (not bounded at 95 %" in projection_markdown({"frozen.recall@1": found}, STUDY)


def test_a_gap_that_grows_along_solve_for_does_not_close():
    growing = results(0.001, {"": 0.04, "_a4": 0.08, "_b2": 0.06})  # steps: +2 a doubling, away from zero
    found = projections(trend_results(growing, STUDY), STUDY)["frozen.recall@1"]
    assert found.crossing is None and found.gap == pytest.approx(-2 * 0.04 + 2 * 0.08 + 0.06)
    assert "it does not close as steps grow" in projection_markdown({"frozen.recall@1": found}, STUDY)


def test_an_axis_without_a_point_beyond_its_base_gives_no_projection():
    found = [r for r in results(0.001) if not r["arm"].endswith("_b2")]
    projected = projections(trend_results(found, STUDY), STUDY)
    assert projected == {"frozen.recall@1": None}
    assert "not every axis has a measured point beyond the base" in projection_markdown(projected, STUDY)
    assert projection_json(projected) == {"frozen.recall@1": None}


THREE_STEPS = parse(StudyDefinition, {
    **FILE,
    "arms": {**FILE["arms"], "fdsl_a16": {}, "same_a16": {}},
    "trend": {**FILE["trend"], "axes": {**FILE["trend"]["axes"], "steps": {"label": "steps", "points": {"base": 1, "a4": 4, "a16": 16}}}},
}, "study")


def test_the_fits_worst_miss_is_the_residual_against_its_own_error_by_hand():
    # steps at log2 0, 2, 4 with gaps g0, gA, gC; the size point fixes its own slope, so it is fitted exactly. With k =
    # g0 - 2 gA + gC the residuals are k/6 at the ends and -k/3 in the middle, their variances S/36 and S/9 (S = s0^2
    # + 4 sA^2 + sC^2): one residual degree of freedom, every residual as far out for its error as the others.
    gaps = {"": 0.04, "_a4": 0.03, "_a16": 0.0, "_b2": 0.06}  # k = 0.04 - 0.06 + 0 = -0.02 (the line bends down)
    found = projections(trend_results(results(0.001, gaps), THREE_STEPS), THREE_STEPS)["frozen.recall@1"]
    miss, k, sd = found.worst_miss, -0.02, math.sqrt(6) * 0.001
    assert miss.point in {"base", "a4", "a16"} and abs(miss.residual) / miss.se == pytest.approx(abs(k) / sd)
    assert (miss.residual, miss.se) == pytest.approx((-k / 3, sd / 3) if miss.point == "a4" else (k / 6, sd / 6))
    shares = [(1 / 36, 1), (4 / 36, 1), (1 / 36, 1)] if miss.point != "a4" else [(1 / 9, 1), (4 / 9, 1), (1 / 9, 1)]
    assert miss.df == pytest.approx(satterthwaite([(w * 1e-6, df) for w, df in shares]))
    assert miss.outside_noise == (abs(k) / sd > t95(miss.df))  # 8.2 standard errors on 2 df: outside
    assert miss.outside_noise and "(outside its 95 % interval)" in projection_markdown({"frozen.recall@1": found}, THREE_STEPS)


def test_points_on_the_lines_are_missed_within_noise_and_an_exact_fit_has_no_miss_to_test():
    straight = {"": 0.04, "_a4": 0.02, "_a16": 0.0, "_b2": 0.06}  # k = 0: the steps points lie on a line
    found = projections(trend_results(results(0.001, straight), THREE_STEPS), THREE_STEPS)["frozen.recall@1"]
    assert found.worst_miss.residual == pytest.approx(0.0, abs=1e-12) and not found.worst_miss.outside_noise
    exact = projections(trend_results(results(0.001), STUDY), STUDY)["frozen.recall@1"]  # three points, three lines
    assert exact.worst_miss is None
    assert "none to test: as many points as lines" in projection_markdown({"frozen.recall@1": exact}, STUDY)
    assert projection_json({"frozen.recall@1": found})["frozen.recall@1"]["worst_miss"]["point"] == found.worst_miss.point


def test_the_page_prints_the_gap_its_interval_and_the_closing_value():
    found = projections(trend_results(results(0.001), STUDY), STUDY)
    page = projection_markdown(found, STUDY)
    half = 100 * t95(found["frozen.recall@1"].df) * 0.003
    assert f"| frozen.recall@1 | -2.0 [{-2 - half:+.1f}, {-2 + half:+.1f}] | steps 2.0, size 0.0 | 8 [" in page
    assert "## Every axis added: far away" in page and "steps 16, pixels 2" in page


@pytest.mark.parametrize(("projection", "message"), [
    ({"label": "x", "target": {"steps": 16}, "solve_for": "steps"}, "no value for the axis 'size'"),
    ({"label": "x", "target": {"steps": 16, "size": 2, "classes": 9}, "solve_for": "steps"}, "trend.projection.target.classes"),
    ({"label": "x", "target": {"steps": 0, "size": 2}, "solve_for": "steps"}, "not a positive axis value"),
    ({"label": "x", "target": {"steps": 16, "size": 2}, "solve_for": "step"}, "did you mean steps"),
])
def test_a_projection_that_names_the_axes_wrongly_is_refused(tmp_path, projection, message):
    path = tmp_path / "s.yml"
    path.write_text(yaml.safe_dump({**FILE, "trend": {**FILE["trend"], "projection": projection}}))
    with pytest.raises(ConfigError, match=message):
        read_study(path)
