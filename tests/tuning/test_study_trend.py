"""A study's trend: the gaps between starts at each point of an axis, their change per doubling and the crossing."""

import json
import math

import pytest

from fdsml.config import ConfigError, parse
from fdsml.tuning.study_file import StudyDefinition, read_study, units
from fdsml.tuning.study_trend import Z95, draw_trend, fit_gap, trend_json, trend_markdown, trend_results

FILE = {
    "title": "t", "question": "q", "env": "fair", "steps": ["pretrain", "frozen_probe"],
    "arms": {
        "fdsl": {}, "fdsl_s4": {}, "same": {}, "same_s4": {}, "paper": {}, "paper_s4": {},
        "scratch": {"study.steps": ["frozen_probe"]}, "pixels": {"study.steps": ["frozen_probe"], "study.seeded": False},
    },
    "seeds": {"pretrain.train.seed": [1, 2]},
    "table": {"metrics": ["frozen.recall@1"]},
    "trend": {
        "metrics": ["frozen.recall@1"], "reference": "fdsl", "rivals": ["same", "paper"], "baseline": "pixels", "floor": "scratch",
        "baseline_metrics": {"frozen.recall@1": "pixels.recall@1"},
        "axes": {"images seen": {"label": "steps", "points": {"base": 1, "s4": 4}}},
    },
}
STUDY = parse(StudyDefinition, FILE, "study")


def unit(arm, seed, value, metric="frozen.recall@1"):
    return {"arm": arm, "seeds": {"pretrain.train.seed": seed} if seed is not None else {}, "metrics": {metric: value}}


RESULTS = [
    unit("fdsl", 1, 0.50), unit("fdsl", 2, 0.54), unit("fdsl_s4", 1, 0.60), unit("fdsl_s4", 2, 0.62),
    unit("same", 1, 0.30), unit("same", 2, 0.34), unit("same_s4", 1, 0.50), unit("same_s4", 2, 0.54),
    unit("paper", 1, 0.40), unit("paper", 2, 0.40), unit("paper_s4", 1, 0.20), unit("paper_s4", 2, 0.20),
    unit("scratch", 1, 0.10), unit("scratch", 2, 0.12), unit("pixels", None, 0.31, "pixels.recall@1"),
]


def test_a_weighted_line_through_three_gaps_by_hand():
    # gaps 10, 6, 2 at x = 1, 2, 4 (u = 0, 1, 2), equal errors 1: slope -4 per doubling, SE 1 / sqrt(sum (u - 1)^2) = 1 / sqrt(2)
    fit = fit_gap([1, 2, 4], [10, 6, 2], [1, 1, 1])
    assert fit.slope == pytest.approx(-4.0) and fit.slope_se == pytest.approx(1 / math.sqrt(2))
    assert fit.narrows and fit.points == 3 and (fit.low, fit.high) == (1, 4)
    at, low, high = fit.crossing
    assert at == pytest.approx(2**2.5)  # 6 - 4 (u - 1) = 0 at u = 2.5
    # Fieller: (6 - 4 t)^2 <= z^2 (1/3 + t^2 / 2), t = u - 1; its roots bound the crossing, the estimate between them
    a, b, c = 16 - Z95**2 / 2, -48, 36 - Z95**2 / 3  # a t^2 + b t + c <= 0
    roots = sorted(((-b - math.sqrt(b * b - 4 * a * c)) / (2 * a), (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)))
    assert (low, high) == pytest.approx((2 ** (1 + roots[0]), 2 ** (1 + roots[1])))
    assert low < at < high


def test_weights_follow_the_errors_a_noisy_point_moves_the_line_less():
    precise = fit_gap([1, 2, 4], [10, 6, 20], [1, 1, 100])
    assert precise.slope == pytest.approx(-4.0, abs=0.01)  # the third point, 100 times noisier, barely counts


def test_a_gap_that_widens_or_stays_has_no_crossing_and_a_flat_slope_within_noise_has_an_unbounded_interval():
    assert fit_gap([1, 2, 4], [2, 6, 10], [1, 1, 1]).crossing is None  # widens
    flat = fit_gap([1, 2, 4], [10, 10, 10], [1, 1, 1])
    assert flat.slope == pytest.approx(0.0) and flat.crossing is None and not flat.narrows
    noisy = fit_gap([1, 2], [10, 9], [3, 3])  # narrows by 1 ± 4.2 per doubling: the crossing cannot be bounded
    assert noisy.narrows and noisy.crossing[1:] == (None, None)


def test_fewer_than_two_points_with_a_value_make_no_line():
    assert fit_gap([1, 2], [5, math.nan], [1, 1]) is None
    assert fit_gap([1], [5], [1]) is None


def test_each_point_compares_the_reference_with_the_best_rival_there_and_with_the_pixels():
    found = trend_results(RESULTS, STUDY)["images seen"]["frozen.recall@1"]
    base, far = found["points"]
    assert (base.point, far.point) == ("base", "s4")
    assert base.best_rival == "paper" and far.best_rival == "same"  # the best rival is chosen at each point
    assert base.gaps["reference - best rival"][0] == pytest.approx(0.52 - 0.40)
    # Welch: fdsl (0.50, 0.54) s^2 0.0008, paper (0.40, 0.40) s^2 0: SE sqrt(0.0008 / 2)
    assert base.gaps["reference - best rival"][1] == pytest.approx(math.sqrt(0.0008 / 2))
    assert far.gaps["reference - best rival"][0] == pytest.approx(0.61 - 0.52)
    assert base.gaps["best rival - baseline"][0] == pytest.approx(0.40 - 0.31)  # pixels ran once: the base arm at every point
    assert far.gaps["reference - baseline"][0] == pytest.approx(0.61 - 0.31)  # its own metric (baseline_metrics) set against frozen.recall@1
    assert far.floor[0] == pytest.approx(0.11)  # scratch does not change with the steps: its base arm
    fit = found["fits"]["reference - best rival"]
    assert fit.slope == pytest.approx((0.09 - 0.12) / 2)  # two points, two doublings apart


def test_the_page_states_each_gap_and_its_change_per_doubling_and_the_json_holds_them():
    found = trend_results(RESULTS, STUDY)
    page = trend_markdown(found, STUDY)
    assert "| base | 1 | 52.0 ± 2.8 | paper 40.0 ± 0.0 | 31.0 (1 run) | 11.0 ± 1.4 | +12.0 ± 2.0 |" in page
    assert "fdsl - the best rival: -1.5 ± " in page and "per doubling of steps (2 points, 1 to 4)" in page
    data = json.loads(json.dumps(trend_json(found)))
    assert data["images seen"]["frozen.recall@1"]["fits"]["reference - best rival"]["slope"] == pytest.approx(-0.015)


def test_the_figure_has_a_panel_per_axis_and_metric():
    figure = draw_trend(trend_results(RESULTS, STUDY), STUDY)
    assert len(figure.axes) == 1 and figure.axes[0].get_xlabel() == "steps (log2 scale)"


def test_an_unseeded_arm_runs_once_and_a_seeded_one_per_combination():
    names = [found.name for found in units(STUDY)]
    assert names.count("pixels") == 1 and sum(name.startswith("fdsl|") for name in names) == 2


def test_a_trend_naming_a_start_without_an_arm_at_a_point_is_refused_naming_the_arm(tmp_path):
    broken = dict(FILE, arms={key: value for key, value in FILE["arms"].items() if key != "paper_s4"})
    path = tmp_path / "broken.yml"
    path.write_text(json.dumps(broken))
    with pytest.raises(ConfigError, match=r"trend.axes.images seen.points.s4: no arm paper_s4"):
        read_study(path)


def test_a_trend_beside_a_figure_is_refused(tmp_path):
    path = tmp_path / "both.yml"
    path.write_text(json.dumps(dict(FILE, figure={"x": "pretrain.train.max_steps", "metrics": ["frozen.recall@1"]})))
    with pytest.raises(ConfigError, match="trend and figure"):
        read_study(path)
