"""A study's table: mean ± std over the spread seed (other seeds averaged first), differences with Welch's standard error."""

import math
from dataclasses import replace

import pytest

from fdsml.config import parse
from fdsml.tuning.study_file import StudyDefinition
from fdsml.tuning.study_table import difference, markdown_table, mean_std, satterthwaite, study_rows, welch

STUDY = parse(
    StudyDefinition,
    {
        "title": "t", "question": "q", "env": "base", "steps": ["finetune"],
        "arms": {"scratch": {}, "fdsl": {}},
        "seeds": {"pretrain.train.seed": [0, 1], "retrieval.seeds": [[0], [1]]},
        "table": {"metrics": ["finetuned.recall@1"], "spread": "pretrain.train.seed", "reference": "scratch"},
    },
    "study",
)


def result(arm, pretrain_seed, finetune_seed, value):
    return {"arm": arm, "seeds": {"pretrain.train.seed": pretrain_seed, "retrieval.seeds": [finetune_seed]}, "metrics": {"finetuned.recall@1": value}}


def test_mean_and_sample_std_and_a_single_value_has_no_spread():
    assert mean_std([0.2, 0.4]) == pytest.approx((0.3, math.sqrt(0.02)))
    assert mean_std([0.5]) == (0.5, 0.0)


def test_the_difference_and_its_welch_standard_error_by_hand():
    # a: 0.5, 0.7 (mean 0.6, s^2 0.02); r: 0.2, 0.3, 0.4 (mean 0.3, s^2 0.01): SE = sqrt(0.02/2 + 0.01/3)
    assert difference([0.5, 0.7], [0.2, 0.3, 0.4]) == pytest.approx((0.3, math.sqrt(0.01 + 0.01 / 3)))


def test_welchs_degrees_of_freedom_by_hand():
    # a: 0.5, 0.7 (s^2/n 0.01, 1 df); r: 0.2, 0.3, 0.4 (s^2/n 0.01/3, 2 df): (0.04/3)^2 / (0.01^2 + (0.01/3)^2 / 2)
    assert welch([0.5, 0.7], [0.2, 0.3, 0.4]) == pytest.approx((0.3, math.sqrt(0.04 / 3), (0.04 / 3) ** 2 / (0.01**2 + (0.01 / 3) ** 2 / 2)))
    assert welch([0.5, 0.7], [0.4])[2] == pytest.approx(1.0)  # a baseline run once (raw pixels) is exact
    assert all(math.isnan(value) for value in welch([0.5], [0.3])[1:])  # one run each: never measured


def test_satterthwaite_reads_a_sum_of_variances_and_counts_parts_without_noise_as_exact():
    assert satterthwaite([(1.0, 1), (4.0, 1)]) == pytest.approx(25 / 17)
    assert satterthwaite([(1.0, 2), (1.0, 2), (3.0, 0)]) == pytest.approx(4.0)  # the run once (0 df) left out
    assert satterthwaite([(0.0, 1), (0.0, 2)]) == 3.0 and math.isnan(satterthwaite([(0.0, 0)]))


def test_fine_tuning_seeds_are_averaged_within_each_pretraining_seed_before_the_spread():
    results = [
        result("scratch", 0, 0, 0.10), result("scratch", 0, 1, 0.20), result("scratch", 1, 0, 0.30), result("scratch", 1, 1, 0.40),
        result("fdsl", 0, 0, 0.50), result("fdsl", 0, 1, 0.70), result("fdsl", 1, 0, 0.30), result("fdsl", 1, 1, 0.30),
    ]
    scratch, fdsl = study_rows(results, STUDY)
    assert scratch["arm"] == "scratch" and scratch["runs"] == 4 and scratch["spread_n"] == 2
    assert scratch["finetuned.recall@1"] == pytest.approx((0.25, math.sqrt(0.02)))  # seeds' means 0.15, 0.35
    assert fdsl["finetuned.recall@1"] == pytest.approx((0.45, 0.15 * math.sqrt(2)))  # seeds' means 0.6, 0.3
    assert fdsl["diff finetuned.recall@1"] == pytest.approx((0.2, math.sqrt(0.045 / 2 + 0.02 / 2)))
    assert "diff finetuned.recall@1" not in scratch
    table = markdown_table([scratch, fdsl], STUDY)
    assert "| scratch | 4 | 2 | 25.0 ± 14.1 | reference |" in table
    assert "| fdsl | 4 | 2 | 45.0 ± 21.2 | +20.0 ± 18.0 |" in table


def test_without_the_reference_arm_a_row_has_no_difference_rather_than_being_called_the_reference():
    rows = study_rows([result("fdsl", 0, 0, 0.5)], STUDY)  # scratch, the reference, did not run (a scale without it)
    assert "| fdsl | 1 | 1 | 50.0 | n/a |" in markdown_table(rows, STUDY)  # one run: its value, no spread


def test_a_table_none_of_whose_units_is_complete_says_so_rather_than_showing_a_bare_header():
    assert markdown_table(study_rows([], STUDY), STUDY) == "No unit of this table is complete yet.\n"


def test_a_metric_an_arm_does_not_yield_is_shown_as_not_applicable():
    rows = study_rows([result("scratch", 0, 0, 0.1), {"arm": "fdsl", "seeds": {"pretrain.train.seed": 0}, "metrics": {}}], STUDY)
    assert "| fdsl | 1 | 1 | n/a | n/a |" in markdown_table(rows, STUDY)


def with_table(**settings) -> StudyDefinition:
    raw = {
        "title": "t", "question": "q", "env": "base", "steps": ["pretrain_heldout"], "arms": {"scratch": {}, "fdsl": {}},
        "seeds": {"pretrain.train.seed": [0, 1, 2]},
        "table": {"metrics": ["last.val_unseen_agreement_same"], "spread": "pretrain.train.seed", "percent": False, "digits": 3, **settings},
    }
    return parse(StudyDefinition, raw, "study")


def test_the_spread_over_every_seed_combination_averages_nothing_first():
    settings = {"metrics": ["finetuned.recall@1"], "spread": "pretrain.train.seed", "every_combination": ["finetuned.recall@1"]}
    study = parse(StudyDefinition, {"title": "t", "question": "q", "env": "base", "steps": ["finetune"], "arms": {"scratch": {}},
                                    "seeds": {"pretrain.train.seed": [0, 1], "retrieval.seeds": [[0], [1]]}, "table": settings}, "study")
    results = [result("scratch", 0, 0, 0.10), result("scratch", 0, 1, 0.20), result("scratch", 1, 0, 0.30), result("scratch", 1, 1, 0.40)]
    (row,) = study_rows(results, study)
    # the four pairs 0.1..0.4: mean 0.25, squares 0.0225 + 0.0025 + 0.0025 + 0.0225 = 0.05 over 3; the seeds' means 0.15, 0.35 alone give 0.141
    assert row["every finetuned.recall@1"] == pytest.approx(math.sqrt(0.05 / 3))
    table = markdown_table([row], study)
    assert "finetuned.recall@1 std, every seed combination |" in table and "| scratch | 4 | 2 | 25.0 ± 14.1 | 12.9 |" in table


def agreement(arm, seed, start, end, trials=400):
    metrics = {"initial.val_unseen_agreement_same": start, "last.val_unseen_agreement_same": end}
    return {"arm": arm, "seeds": {"pretrain.train.seed": seed}, "metrics": metrics, "trials": {"pretrain.validation.triplets": trials}}


def test_the_gain_per_seed_and_the_smallest_gain_over_three_binomial_standard_errors_by_hand():
    study = with_table(gain={"start": "initial.val_unseen_agreement_same", "end": "last.val_unseen_agreement_same"}, trials="pretrain.validation.triplets")
    results = [agreement("scratch", 0, 0.50, 0.60), agreement("scratch", 1, 0.52, 0.70), agreement("scratch", 2, 0.48, 0.62)]
    (row,) = study_rows(results, study)
    # gains 0.10, 0.18, 0.14; the largest SE is the end nearest 0.5: sqrt(0.6 * 0.4 / 400); 0.10 / (3 * 0.0244949) = 1.361
    assert row["gain"]["gains"] == pytest.approx([0.10, 0.18, 0.14])
    assert row["gain"]["min_over_3se"] == pytest.approx(0.10 / (3 * math.sqrt(0.24 / 400)))
    assert "| +0.140 ± 0.040 (+0.100, +0.180, +0.140); 1.4 |" in markdown_table([row], study)
    assert "last.val_unseen_agreement_same - initial.val_unseen_agreement_same per pretrain.train.seed; min gain / 3 SE" in markdown_table([row], study)


def test_an_arm_without_the_gains_metrics_shows_not_applicable():
    study = with_table(gain={"start": "initial.val_unseen_agreement_same", "end": "last.val_unseen_agreement_same"}, trials="pretrain.validation.triplets")
    rows = study_rows([{"arm": "fdsl", "seeds": {"pretrain.train.seed": 0}, "metrics": {}, "trials": {"pretrain.validation.triplets": 400}}], study)
    assert markdown_table(rows, study).rstrip().endswith("| n/a | n/a (n/a); n/a |")


def test_a_wilson_interval_pools_the_units_successes_and_trials_seven_of_ten_by_hand():
    study = with_table(intervals=["last.val_unseen_agreement_same"], trials="pretrain.validation.triplets")
    results = [agreement("scratch", 0, 0.5, 0.6, trials=5), agreement("scratch", 1, 0.5, 0.8, trials=5)]  # 3 + 4 of 10
    (row,) = study_rows(results, study)
    # Wilson 95 %, p = 0.7, n = 10, z = 1.95996: centre (0.7 + z²/20) / (1 + z²/10) = 0.64449, half-width 0.24771
    assert row["interval last.val_unseen_agreement_same"] == pytest.approx((0.39678, 0.89220), abs=1e-5)
    assert "| [0.397, 0.892] |" in markdown_table([row], study)


def test_a_proportions_own_count_of_trials_comes_before_the_tables_parameter():
    study = with_table(intervals=["last.val_unseen_agreement_same"], trials="pretrain.validation.triplets")
    counted = agreement("scratch", 0, 0.5, 0.75, trials=400)
    counted["metrics"]["last.val_unseen_agreement_same.trials"] = 4  # 3 of 4, not 300 of 400
    (row,) = study_rows([counted], study)
    # Wilson 95 %, p = 0.75, n = 4: centre (0.75 + z²/8) / (1 + z²/4) = 0.62753, half-width 0.32688
    assert row["interval last.val_unseen_agreement_same"] == pytest.approx((0.30065, 0.95441), abs=1e-5)


def test_more_tables_are_drawn_from_the_same_units_under_their_heading():
    from fdsml.tuning.study_runner import StudySettings, study_report

    study = parse(StudyDefinition, {
        "title": "t", "question": "q", "env": "base", "steps": ["pretrain_heldout"], "arms": {"scratch": {}},
        "seeds": {"pretrain.train.seed": [0, 1, 2]},
        "table": {"metrics": ["last.val_unseen_agreement_same"], "spread": "pretrain.train.seed", "percent": False, "digits": 3},
        "more_tables": {"Where it starts": {"metrics": ["initial.val_unseen_agreement_same"], "spread": "pretrain.train.seed", "percent": False, "digits": 3}},
    }, "study")
    results = [agreement("scratch", 0, 0.50, 0.60) | {"commit": "abc"}, agreement("scratch", 1, 0.52, 0.70) | {"commit": "abc"}]
    page, found = study_report(study, StudySettings(name="t"), results)
    assert "\n**Where it starts**\n\n| arm | runs | n (pretrain.train.seed) | initial.val_unseen_agreement_same |" in page
    assert "| scratch | 2 | 2 | 0.510 ± 0.014 |" in page  # mean of 0.50 and 0.52, std 0.02 / sqrt(2)
    assert found["more_tables"]["Where it starts"][0]["initial.val_unseen_agreement_same"] == pytest.approx((0.51, math.sqrt(0.0002)))


def test_fractions_are_shown_in_percent_and_seconds_and_counts_as_they_are():
    metrics = ["sweeps.contractive_fraction", "sweeps.n_sweeps", "finetune.seconds", "cpu_seconds.descriptor.sweeps"]
    study = replace(STUDY, table=replace(STUDY.table, metrics=tuple(metrics), reference=None))
    values = {"sweeps.contractive_fraction": 0.5, "sweeps.n_sweeps": 12.0, "finetune.seconds": 3.25, "cpu_seconds.descriptor.sweeps": 1.5}
    results = [{"arm": "scratch", "seeds": {"pretrain.train.seed": 0}, "metrics": values}]
    assert "| scratch | 1 | 1 | 50.0 | 12.0 | 3.2 | 1.5 |" in markdown_table(study_rows(results, study), study)


def test_a_page_run_at_a_scale_states_the_seeds_that_scale_ran_not_the_files():
    from fdsml.tuning.study_runner import StudySettings, study_report

    study = parse(StudyDefinition, {
        "title": "t", "question": "q", "env": "base", "steps": ["finetune"], "arms": {"scratch": {}},
        "seeds": {"pretrain.train.seed": [1, 2], "retrieval.seeds": [[0], [1]]},
        "table": {"metrics": ["finetuned.recall@1"]},
        "scales": {"first": {"seeds": {"retrieval.seeds": [[0]]}}},
    }, "study")
    results = [result("scratch", seed, 0, 0.5) | {"commit": "abc"} for seed in (1, 2)]
    page, _ = study_report(study, StudySettings(name="t", scale="first"), results)
    assert "seeds `pretrain.train.seed` [1, 2], `retrieval.seeds` [[0]];" in page
    assert "At scale `first`" in page


def agreement_unit(arm, seed, value):
    return {"arm": arm, "seeds": {"pretrain.train.seed": seed}, "metrics": {"last.val_unseen_agreement_same": value}}


def test_paired_differences_pair_each_seed_with_the_references_and_take_their_standard_error():
    # per seed a - r: seed 0: 0.50 - 0.20 = 0.30, seed 1: 0.30 - 0.10 = 0.20, seed 2: 0.60 - 0.20 = 0.40 (the units
    # arrive in another order for each arm); mean 0.30, sd 0.1, SE 0.1 / sqrt(3); Welch's on the same values: 0.133
    study = with_table(reference="scratch", paired=True)
    metric = "last.val_unseen_agreement_same"
    unit = agreement_unit
    results = [unit("scratch", 0, 0.20), unit("scratch", 1, 0.10), unit("scratch", 2, 0.20),
               unit("fdsl", 2, 0.60), unit("fdsl", 0, 0.50), unit("fdsl", 1, 0.30)]  # fmt: skip
    fdsl = study_rows(results, study)[1]
    assert fdsl[f"diff {metric}"] == pytest.approx((0.30, 0.1 / math.sqrt(3)))
    assert difference([0.6, 0.5, 0.3], [0.2, 0.1, 0.2])[1] == pytest.approx(math.sqrt(0.0233333 / 3 + 0.0033333 / 3), rel=1e-4)
    assert f"{metric} - scratch (± paired SE)" in markdown_table(study_rows(results, study), study)


def test_a_table_shows_only_its_arms_in_its_order():
    study = with_table(arms=["fdsl"])
    results = [agreement_unit("scratch", 0, 0.2), agreement_unit("fdsl", 0, 0.5)]
    assert [row["arm"] for row in study_rows(results, study)] == ["fdsl"]


def test_a_metric_an_arm_lacks_in_several_runs_is_not_applicable_rather_than_an_error():
    assert all(math.isnan(value) for value in mean_std([math.nan, math.nan]))


def test_a_difference_between_two_single_runs_has_no_standard_error_and_says_so():
    assert math.isnan(difference([0.5], [0.3])[1]) and difference([0.5], [0.3])[0] == pytest.approx(0.2)
    rows = study_rows([result("scratch", 0, 0, 0.3), result("fdsl", 0, 0, 0.5)], STUDY)
    assert "| fdsl | 1 | 1 | 50.0 | +20.0 (no SE: one run each) |" in markdown_table(rows, STUDY)


def test_a_paired_difference_needs_two_pairs_for_its_error_and_one_pair_still_gives_its_value():
    from fdsml.tuning.study_table import paired_difference

    # two pairs: differences 0.3 and 0.1, mean 0.2, sd 0.1414, SE 0.1
    assert paired_difference({"0": 0.5, "1": 0.3}, {"0": 0.2, "1": 0.2}) == pytest.approx((0.2, 0.1))
    value, error = paired_difference({"0": 0.5, "1": 0.3}, {"0": 0.2})
    assert value == pytest.approx(0.3) and math.isnan(error)
    assert all(math.isnan(part) for part in paired_difference({"0": 0.5}, {"1": 0.2}))


def test_without_a_list_of_differences_only_the_first_metric_is_set_against_the_reference():
    study = with_table(metrics=["last.val_unseen_agreement_same", "initial.val_unseen_agreement_same"], reference="scratch")
    results = [agreement("scratch", 0, 0.5, 0.6), agreement("fdsl", 0, 0.5, 0.7)]
    fdsl = study_rows(results, study)[1]
    assert "diff last.val_unseen_agreement_same" in fdsl and "diff initial.val_unseen_agreement_same" not in fdsl


def test_a_gain_whose_end_has_no_binomial_error_has_no_ratio():
    from fdsml.tuning.study_table import gain

    assert math.isnan(gain([0.5], [1.0], 100)["min_over_3se"])  # every trial right: sqrt(1 x 0 / n) = 0


def test_a_unit_lacking_a_metric_makes_its_extra_columns_not_applicable_rather_than_an_error():
    study = with_table(every_combination=["last.val_unseen_agreement_same"], intervals=["last.val_unseen_agreement_same"], trials="pretrain.validation.triplets")
    lacking = {"arm": "scratch", "seeds": {"pretrain.train.seed": 1}, "metrics": {}, "trials": {"pretrain.validation.triplets": 400}}
    (row,) = study_rows([agreement("scratch", 0, 0.5, 0.6), lacking], study)
    assert math.isnan(row["every last.val_unseen_agreement_same"]) and all(math.isnan(v) for v in row["interval last.val_unseen_agreement_same"])
    assert markdown_table([row], study).rstrip().endswith("| n/a | n/a |")


def test_a_count_is_shown_as_it_is_however_deep_its_name():
    from fdsml.tuning.study_table import _scale

    percent = with_table(percent=True).table
    assert _scale(percent, "same_by_position.angle.n_triplets") == 1.0 and _scale(percent, "same_by_position.angle") == 100.0


def test_a_page_names_the_machines_its_units_ran_on_and_says_where_a_unit_did_not_record_one():
    from fdsml.tuning.study_runner import StudySettings, study_report

    study = parse(StudyDefinition, {
        "title": "t", "question": "q", "env": "base", "steps": ["finetune"], "arms": {"scratch": {}},
        "seeds": {"pretrain.train.seed": [1, 2, 3]}, "table": {"metrics": ["finetuned.recall@1"]},
    }, "study")
    results = [result("scratch", 1, 0, 0.5) | {"commit": "abc", "machine": "Xeon, 2 cores"},
               result("scratch", 2, 0, 0.5) | {"commit": "abc", "machine": "EPYC, 2 cores"},
               result("scratch", 3, 0, 0.5) | {"commit": "abc"}]  # fmt: skip
    page, _ = study_report(study, StudySettings(name="t"), results)
    assert "Commit(s) abc; machine(s) EPYC, 2 cores; Xeon, 2 cores; not recorded." in page
