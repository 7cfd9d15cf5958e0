"""A study's table: mean ± std over the spread seed (other seeds averaged first), differences with Welch's standard error."""

import math

import pytest

from fdsml.config import parse
from fdsml.tuning.study_file import StudyDefinition
from fdsml.tuning.study_table import difference, markdown_table, mean_std, study_rows

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


def test_a_metric_an_arm_does_not_yield_is_shown_as_not_applicable():
    rows = study_rows([result("scratch", 0, 0, 0.1), {"arm": "fdsl", "seeds": {"pretrain.train.seed": 0}, "metrics": {}}], STUDY)
    assert "| fdsl | 1 | 1 | n/a | n/a |" in markdown_table(rows, STUDY)
