"""A study's trend: the gaps between starts at each point of an axis, their change per doubling and the crossing."""

import json
import math

import pytest

from fdsml.config import ConfigError, parse
from fdsml.tuning.study_file import StudyDefinition, read_study, units
from fdsml.tuning.study_table import satterthwaite
from fdsml.tuning.study_trend import axis_value, describe_fit, draw_trend, fit_gap, t95, trend_json, trend_markdown, trend_results

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


def test_a_line_through_three_gaps_by_hand():
    # gaps 10, 6, 2 at x = 1, 2, 4 (u = 0, 1, 2), SE 1 on 2 degrees of freedom each: slope -4 per doubling,
    # SE sqrt(sum c^2) with c = (u - 1) / 2 = (-0.5, 0, 0.5): 1 / sqrt(2), on (0.5)^2 / (2 * 0.25^2 / 2) = 4 df
    fit = fit_gap([1, 2, 4], [(10, 1, 2), (6, 1, 2), (2, 1, 2)])
    assert fit.slope == pytest.approx(-4.0) and fit.slope_se == pytest.approx(1 / math.sqrt(2)) and fit.slope_df == pytest.approx(4.0)
    assert fit.narrows and fit.points == 3 and (fit.low, fit.high) == (1, 4)
    at, low, high = fit.crossing
    assert at == pytest.approx(2**2.5)  # 6 - 4 (u - 1) = 0 at u = 2.5
    # Fieller at Student's t on 4 df (the slope's, below the level's 6): (6 - 4 t)^2 <= q^2 (1/3 + t^2 / 2), t = u - 1
    q = 2.776445
    a, b, c = 16 - q**2 / 2, -48, 36 - q**2 / 3  # a t^2 + b t + c <= 0
    roots = sorted(((-b - math.sqrt(b * b - 4 * a * c)) / (2 * a), (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)))
    assert (low, high) == pytest.approx((2 ** (1 + roots[0]), 2 ** (1 + roots[1])), rel=1e-5)
    assert low < at < high


def test_the_students_t_quantile_replaces_the_normals_two_seeds_give_one_degree_of_freedom():
    assert t95(1) == pytest.approx(12.706, abs=1e-3) and t95(2) == pytest.approx(4.303, abs=1e-3)
    assert t95(math.inf) == pytest.approx(1.960, abs=1e-3)


def test_every_point_weighs_the_same_a_point_whose_seeds_happen_to_agree_does_not_pull_the_line():
    lucky = fit_gap([1, 2, 4], [(10, 1, 1), (6, 1, 1), (20, 0.001, 1)])
    assert lucky.slope == pytest.approx(5.0)  # (20 - 10) / 2 doublings, not the third point's line
    noisy = fit_gap([1, 2, 4], [(10, 1, 1), (6, 1, 1), (20, 100, 1)])
    assert noisy.slope == pytest.approx(5.0) and noisy.slope_se == pytest.approx(math.sqrt(0.25 + 0.25 * 100**2))


def _line_at(xs, gaps, u):
    """The least-squares line's value at u and its standard error, by propagating each gap's variance directly."""
    us = [math.log2(x) for x in xs]
    centre, spread = sum(us) / len(us), sum((v - sum(us) / len(us)) ** 2 for v in us)
    loads = [1 / len(us) + (v - centre) * (u - centre) / spread for v in us]  # the value is sum(load * gap)
    return sum(load * g for load, (g, _, _) in zip(loads, gaps)), math.sqrt(sum(load**2 * e**2 for load, (_, e, _) in zip(loads, gaps)))


def test_the_crossings_interval_ends_where_zero_leaves_the_lines_own_band_with_unequal_errors():
    xs, gaps = [1, 2, 4], [(10, 1.0, 2), (7, 0.5, 3), (3, 0.25, 1)]
    fit = fit_gap(xs, gaps)
    level_df = satterthwaite([(e * e / 9, df) for _, e, df in gaps])
    q = t95(min(fit.slope_df, level_df))
    for bound in fit.crossing[1:]:  # at each end of the interval the line is exactly q standard errors from zero
        value, error = _line_at(xs, gaps, math.log2(bound))
        assert abs(value) == pytest.approx(q * error, rel=1e-6)
    at = fit.crossing[0]
    assert _line_at(xs, gaps, math.log2(at))[0] == pytest.approx(0.0, abs=1e-9)


def test_a_gap_that_widens_or_stays_has_no_crossing_and_a_flat_slope_within_noise_has_an_unbounded_interval():
    assert fit_gap([1, 2, 4], [(2, 1, 2), (6, 1, 2), (10, 1, 2)]).crossing is None  # widens
    flat = fit_gap([1, 2, 4], [(10, 1, 2), (10, 1, 2), (10, 1, 2)])
    assert flat.slope == pytest.approx(0.0) and flat.crossing is None and not flat.narrows
    noisy = fit_gap([1, 2], [(10, 3, 1), (9, 3, 1)])  # narrows by 1 ± 4.2 per doubling: the crossing cannot be bounded
    assert noisy.narrows and noisy.crossing[1:] == (None, None)
    sentence = describe_fit("reference - best rival", noisy, STUDY.trend, STUDY.trend.axes["images seen"], 1.0, 1)
    assert "cannot be told from flat at 95 %, so no crossing is bounded (the line's zero: 1,024)" in sentence  # 10 - u = 0


def test_a_crossing_between_the_points_is_not_called_extrapolated():
    between = describe_fit("reference - best rival", fit_gap([1, 4], [(4, 0.1, 2), (-4, 0.1, 2)]), STUDY.trend, STUDY.trend.axes["images seen"], 1.0, 1)
    beyond = describe_fit("reference - best rival", fit_gap([1, 4], [(8, 0.1, 2), (4, 0.1, 2)]), STUDY.trend, STUDY.trend.axes["images seen"], 1.0, 1)
    assert "it changes sign within the range, at 2 [" in between and "(95 %, between the points)" in between
    assert "would close at 16 [" in beyond and "(95 %, extrapolated)" in beyond


def test_a_gap_that_does_not_narrow_states_the_fastest_narrowing_students_t_allows():
    fit = fit_gap([1, 2, 4], [(10, 1, 2), (10.5, 1, 2), (11, 1, 2)])  # widens by 0.5 ± 0.71 on 4 df
    sentence = describe_fit("reference - best rival", fit, STUDY.trend, STUDY.trend.axes["images seen"], 1.0, 2)
    assert "4.0 degrees of freedom" in sentence
    assert f"by at most {2.776445 / math.sqrt(2) - 0.5:.2f} per doubling" in sentence  # 1.46, where 1.96 would say 0.89


def test_fewer_than_two_points_with_a_value_make_no_line():
    assert fit_gap([1, 2], [(5, 1, 1), (math.nan, 1, 1)]) is None
    assert fit_gap([1, 2], [(5, 1, 1), (4, math.nan, math.nan)]) is None  # each side ran once: no error
    assert fit_gap([1], [(5, 1, 1)]) is None


def test_each_point_compares_the_reference_with_the_best_rival_there_and_with_the_pixels():
    found = trend_results(RESULTS, STUDY)["images seen"]["frozen.recall@1"]
    base, far = found["points"]
    assert (base.point, far.point) == ("base", "s4")
    assert base.best_rival == "paper" and far.best_rival == "same"  # the best rival is chosen at each point
    assert base.gaps["reference - best rival"][0] == pytest.approx(0.52 - 0.40)
    # Welch: fdsl (0.50, 0.54) s^2 0.0008, paper (0.40, 0.40) s^2 0: SE sqrt(0.0008 / 2)
    assert base.gaps["reference - best rival"][1] == pytest.approx(math.sqrt(0.0008 / 2))
    assert base.gaps["reference - best rival"][2] == pytest.approx(1.0)  # paper's two seeds agree: fdsl's one df
    # fdsl_s4 (0.60, 0.62) s^2/2 = 0.0001, same_s4 (0.50, 0.54) 0.0004: (0.0005)^2 / (0.0001^2 + 0.0004^2) df
    assert far.gaps["reference - best rival"][2] == pytest.approx(0.0005**2 / (0.0001**2 + 0.0004**2))
    assert far.gaps["reference - best rival"][0] == pytest.approx(0.61 - 0.52)
    assert base.gaps["best rival - baseline"][0] == pytest.approx(0.40 - 0.31)  # pixels ran once: the base arm at every point
    assert far.gaps["reference - baseline"][0] == pytest.approx(0.61 - 0.31)  # its own metric (baseline_metrics) set against frozen.recall@1
    assert far.floor[0] == pytest.approx(0.11)  # scratch does not change with the steps: its base arm
    fit = found["fits"]["reference - best rival"]
    assert fit.slope == pytest.approx((0.09 - 0.12) / 2)  # two points, two doublings apart
    # the slope's variance 0.25 (0.0004 + 0.0005), each gap's part on its own degrees of freedom (1 and 1.47)
    far_df = 0.0005**2 / (0.0001**2 + 0.0004**2)
    assert fit.slope_df == pytest.approx((0.25 * 0.0009) ** 2 / ((0.25 * 0.0004) ** 2 + (0.25 * 0.0005) ** 2 / far_df))


def test_the_page_states_each_gap_and_its_change_per_doubling_and_the_json_holds_them():
    found = trend_results(RESULTS, STUDY)
    page = trend_markdown(found, STUDY)
    assert "| base | 1 | 52.0 ± 2.8 | paper 40.0 ± 0.0 | 31.0 (1 run) | 11.0 ± 1.4 | +12.0 ± 2.0 |" in page
    assert "fdsl - the best rival: -1.5 ± " in page and "per doubling of steps (2 points, 1 to 4; the SE on 2.5 degrees of freedom)" in page
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


def test_the_crossing_does_not_depend_on_the_unit_the_gaps_are_in():
    # the study's gaps are fractions (R@1 0.12, not 12): the same line in either unit closes at the same place
    points = [(10, 1, 2), (6, 1, 2), (2, 1, 2)]
    in_points = fit_gap([1, 2, 4], points)
    as_fractions = fit_gap([1, 2, 4], [(g / 100, e / 100, df) for g, e, df in points])
    assert as_fractions.crossing == pytest.approx(in_points.crossing) and as_fractions.slope == pytest.approx(in_points.slope / 100)
    sentence = describe_fit("reference - best rival", as_fractions, STUDY.trend, STUDY.trend.axes["images seen"], 100.0, 1)
    assert "-4.0 ± 0.7 per doubling" in sentence  # shown in points: 100 x (-0.04 ± 0.0071)


def test_a_gap_closing_by_exactly_one_a_doubling_narrows():
    fit = fit_gap([1, 2], [(-2, 0.1, 2), (-1, 0.1, 2)])
    assert fit.narrows and fit.crossing[0] == pytest.approx(4.0)  # -2, -1, 0: at x = 4


def test_the_fastest_narrowing_below_one_is_stated_as_it_is():
    fit = fit_gap([1, 2, 4], [(10, 1, 2), (11, 1, 2), (12, 1, 2)])  # widens by 1 ± 0.71 on 4 df
    sentence = describe_fit("reference - best rival", fit, STUDY.trend, STUDY.trend.axes["images seen"], 1.0, 2)
    assert f"by at most {2.776445 / math.sqrt(2) - 1:.2f} per doubling" in sentence  # 0.96


def test_a_gap_whose_sign_changed_early_in_the_range_crossed_there_though_its_line_is_past_zero_at_the_centre():
    # the frozen FDSL - pixels gaps of the image-size axis: +2.0, -3.3, -9.7 at 48, 96, 128 px; the line is already
    # negative at its centre, so a test of the slope's sign against the centre's would call this a gap that never narrowed
    fit = fit_gap([48, 96, 128], [(2.0, 1.4, 1), (-3.3, 0.1, 1), (-9.7, 1.6, 1)])
    assert fit.slope < 0 and fit.narrows and 48 < fit.crossing[0] < 96
    sentence = describe_fit("reference - baseline", fit, STUDY.trend, STUDY.trend.axes["images seen"], 1.0, 1)
    assert "it changes sign within the range, at " in sentence and "does not narrow" not in sentence
    at, low, high = (f"{x:.3g}" for x in fit.crossing)  # three significant figures, as wide as the interval allows
    assert f"at {at} [{low}, {high}] (95 %, between the points)" in sentence and len(at) <= 4
    away = fit_gap([48, 96, 128], [(-2.0, 1.4, 1), (-3.3, 0.1, 1), (-9.7, 1.6, 1)])  # below zero from the first point on
    assert not away.narrows and away.crossing is None


def test_a_crossing_at_the_last_measured_point_lies_between_the_points():
    sentence = describe_fit("reference - best rival", fit_gap([1, 4], [(4, 0.1, 2), (0, 0.1, 2)]), STUDY.trend, STUDY.trend.axes["images seen"], 1.0, 1)
    assert "it changes sign within the range, at 4 [" in sentence and "(95 %, between the points)" in sentence


SCATTERED = {
    **FILE,
    "arms": {name: {} for name in ("fdsl", "fdsl_s2", "fdsl_s4", "same", "same_s2", "same_s4", "paper", "paper_s2", "paper_s4")}
    | {"scratch": {"study.steps": ["frozen_probe"]}, "scratch_s4": {"study.steps": ["frozen_probe"]},
       "pixels": {"study.steps": ["frozen_probe"], "study.seeded": False}, "pixels_s4": {"study.steps": ["frozen_probe"], "study.seeded": False}},
    "seeds": {"pretrain.train.seed": [1, 2], "retrieval.seeds": [[0], [1]]},
    "trend": {
        "metrics": ["frozen.recall@1"], "reference": "fdsl", "rivals": ["paper", "same"], "baseline": "pixels", "floor": "scratch",
        "spread": "pretrain.train.seed", "axes": {"steps": {"label": "steps", "points": {"s4": 4, "base": 1, "s2": 2}}},
    },
}  # fmt: skip


def seeded(arm, pretrain, finetune, value):
    metrics = {} if value is None else {"frozen.recall@1": value}
    return {"arm": arm, "seeds": {"pretrain.train.seed": pretrain, "retrieval.seeds": [finetune]}, "metrics": metrics}


def test_a_point_reads_each_trunk_once_its_own_baseline_and_floor_and_never_a_rival_without_the_metric():
    study = parse(StudyDefinition, SCATTERED, "study")
    results = [
        seeded("fdsl", 1, 0, 0.50), seeded("fdsl", 1, 1, 0.54), seeded("fdsl", 2, 0, 0.56), seeded("fdsl", 2, 1, 0.60),
        seeded("same", 1, 0, 0.30), seeded("same", 1, 1, 0.30), seeded("same", 2, 0, 0.40), seeded("same", 2, 1, 0.40),
        seeded("paper", 1, 0, None), seeded("paper", 2, 0, None),  # the metric missing: never the best rival
        seeded("same_s2", 1, 0, 0.5), seeded("same_s2", 2, 0, 0.5),  # s2: no fdsl_s2 ran, so no point there
        seeded("fdsl_s4", 1, 0, 0.70), seeded("fdsl_s4", 2, 0, 0.74), seeded("same_s4", 1, 0, 0.60), seeded("same_s4", 2, 0, 0.64),
        seeded("scratch", 1, 0, 0.10), seeded("scratch", 2, 0, 0.12), seeded("scratch_s4", 1, 0, 0.30), seeded("scratch_s4", 2, 0, 0.32),
        {"arm": "pixels", "seeds": {}, "metrics": {"frozen.recall@1": 0.31}}, {"arm": "pixels_s4", "seeds": {}, "metrics": {"frozen.recall@1": 0.41}},
    ]  # fmt: skip
    base, far = trend_results(results, study)["steps"]["frozen.recall@1"]["points"]
    assert (base.point, far.point) == ("base", "s4")  # by value, whatever the file's order; s2 left out, s4 kept
    assert base.best_rival == "same" and base.reference[2] == 2  # two trunks, each the mean of its two fine-tunings
    # fdsl (0.52, 0.58): s^2/2 0.0009; same (0.30, 0.40): 0.0025
    assert base.gaps["reference - best rival"][:2] == pytest.approx((0.20, math.sqrt(0.0034)))
    assert base.gaps["reference - baseline"][0] == pytest.approx(0.55 - 0.31)  # the baseline's own metric by default
    assert far.gaps["reference - baseline"][0] == pytest.approx(0.72 - 0.41) and far.floor[0] == pytest.approx(0.31)  # their s4 arms


def test_the_figure_draws_each_gap_at_its_point_with_its_students_t_interval():
    found = trend_results(RESULTS, STUDY)
    panel = draw_trend(found, STUDY).axes[0]
    gap_bars = panel.containers[0]  # reference - best rival, drawn first, at offset -0.04
    assert list(gap_bars.lines[0].get_xdata()) == pytest.approx([-0.04, 2 - 0.04])  # log2 of 1 and 4
    assert list(gap_bars.lines[0].get_ydata()) == pytest.approx([12.0, 9.0])  # in points, as the page shows them
    (segments,) = gap_bars.lines[2]
    base = found["images seen"]["frozen.recall@1"]["points"][0].gaps["reference - best rival"]
    low, high = segments.get_segments()[0][:, 1]
    assert (high - low) / 2 == pytest.approx(t95(base[2]) * 100 * base[1])  # 12.7 x 2.0 points: one df
    assert [label.get_text() for label in panel.get_xticklabels()] == ["1", "4"] and panel.get_title() == "images seen: frozen.recall@1"
    assert len(panel.containers) == 3  # the gaps to the pixels too


def test_the_page_lays_out_each_axis_as_a_table_with_the_baseline_and_floor_columns_it_has():
    page = trend_markdown(trend_results(RESULTS, STUDY), STUDY)
    assert ("\n**images seen: frozen.recall@1**\n\n| point | steps | fdsl | best rival | pixels | scratch | fdsl - best rival | fdsl - pixels | best rival - pixels |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n") in page
    bare = parse(StudyDefinition, {**FILE, "table": {"metrics": ["frozen.recall@1"], "percent": False, "digits": 2},
                                   "trend": {key: value for key, value in FILE["trend"].items() if key not in ("baseline", "floor", "baseline_metrics")}}, "study")
    page = trend_markdown(trend_results(RESULTS, bare), bare)
    assert "over the every seed combination ± their standard error" in page  # no spread key: each unit a sample
    assert "| point | steps | fdsl | best rival | fdsl - best rival |\n|---|---:|---:|---:|---:|\n| base | 1 | 0.52 ± 0.03 | paper 0.40 ± 0.00 | +0.12 ± 0.02 |\n" in page
    assert page.count("\n- ") == 1 and "\n- fdsl - the best rival: -0.02 ± 0.02 per doubling" in page  # one gap, one sentence, as fractions


def test_an_axis_is_read_in_the_order_of_its_values_not_of_its_names():
    shrinking = parse(StudyDefinition, {**FILE, "trend": {**FILE["trend"], "axes": {"images seen": {"label": "steps", "points": {"base": 1, "s4": 0.5}}}}}, "study")
    assert [p.point for p in trend_results(RESULTS, shrinking)["images seen"]["frozen.recall@1"]["points"]] == ["s4", "base"]


def test_a_point_whose_baseline_and_floor_did_not_run_has_no_gap_to_them_rather_than_an_error():
    study = parse(StudyDefinition, SCATTERED, "study")
    results = [seeded(arm, seed, 0, value) for arm, values in {"fdsl": (0.5, 0.6), "same": (0.3, 0.4), "fdsl_s4": (0.7, 0.8), "same_s4": (0.6, 0.7),
               "scratch": (0.1, 0.1)}.items() for seed, value in zip((1, 2), values)] + [{"arm": "pixels", "seeds": {}, "metrics": {"frozen.recall@1": 0.3}}]
    base, far = trend_results(results, study)["steps"]["frozen.recall@1"]["points"]  # scratch_s4 and pixels_s4 never ran
    assert base.floor is not None and "reference - baseline" in base.gaps
    assert far.floor is None and far.baseline is None and set(far.gaps) == {"reference - best rival"}


def test_a_gap_whose_interval_excludes_narrowing_is_said_to_widen_not_to_narrow_by_at_most_nothing():
    fit = fit_gap([1, 2, 4], [(10, 0.1, 2), (12, 0.1, 2), (14, 0.1, 2)])  # widens by 2 ± 0.07 on 4 df
    sentence = describe_fit("reference - best rival", fit, STUDY.trend, STUDY.trend.axes["images seen"], 1.0, 1)
    assert sentence.endswith("it does not narrow over this range (95 %: it widens).") and "at most" not in sentence


def test_an_axis_value_reads_whole_to_a_billion_then_as_a_power_of_ten():
    assert [axis_value(x) for x in (60.3857, 48.0, 617.4, 134_000_000, 1.117e33)] == ["60.4", "48", "617", "134,000,000", "1.1e+33"]


def test_a_point_the_metric_was_not_measured_at_is_left_out_not_shown_as_n_a():
    # converged only at the base point (as the regime study runs it at the axis's ends): s4 has frozen values only
    study = parse(StudyDefinition, {**FILE, "trend": {**FILE["trend"], "metrics": ["frozen.recall@1", "converged.map@r"]}}, "study")
    converged = {"fdsl": 0.40, "same": 0.30, "paper": 0.20, "scratch": 0.10}
    results = [{**r, "metrics": {**r["metrics"], "converged.map@r": converged[r["arm"]] + r["seeds"]["pretrain.train.seed"] / 100}}
               if r["arm"] in converged else r for r in RESULTS]
    found = trend_results(results, study)["images seen"]
    assert [p.point for p in found["converged.map@r"]["points"]] == ["base"]
    assert [p.point for p in found["frozen.recall@1"]["points"]] == ["base", "s4"]
    assert "| s4 |" not in trend_markdown({"images seen": {"converged.map@r": found["converged.map@r"]}}, study)
