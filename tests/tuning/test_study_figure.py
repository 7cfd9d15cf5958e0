"""A study's figure: arms that differ only in the x key are one line named by their common prefix; an arm without x is a band;
one panel per metric, none without a figure."""

from dataclasses import replace

from fdsml.config import parse
from fdsml.tuning.study_figure import draw_figure, figure_series
from fdsml.tuning.study_file import StudyDefinition

STUDY = parse(
    StudyDefinition,
    {
        "title": "t", "question": "q", "env": "base", "steps": ["pretrain", "finetune"],
        "arms": {
            "scratch": {"study.steps": ["finetune"]},
            "fdsl_300": {"pretrain.objective": "fdsl", "pretrain.train.max_steps": 300},
            "fdsl_30": {"pretrain.objective": "fdsl", "pretrain.train.max_steps": 30},
            "each_30": {"pretrain.objective": "pa_triplet", "pretrain.pa_triplet.filter": "each", "pretrain.train.max_steps": 30},
            "same_30": {"pretrain.objective": "pa_triplet", "pretrain.pa_triplet.filter": "same", "pretrain.train.max_steps": 30},
        },
        "seeds": {"pretrain.train.seed": [0, 1]},
        "table": {"metrics": ["finetuned.recall@1"], "spread": "pretrain.train.seed"},
        "figure": {"x": "pretrain.train.max_steps", "metrics": ["finetuned.recall@1"], "title": "R@1 against steps"},
    },
    "study",
)
ROWS = [{"arm": arm, "finetuned.recall@1": (value, 0.01)} for arm, value in
        (("scratch", 0.2), ("fdsl_300", 0.5), ("fdsl_30", 0.3), ("each_30", 0.25), ("same_30", 0.27))]


def test_arms_sharing_every_key_but_x_are_one_line_in_x_order_and_scratch_is_a_band():
    lines, bands = figure_series(STUDY, ROWS)
    assert list(bands) == ["scratch"]
    assert set(lines) == {"fdsl", "each_30", "same_30"}  # each and same differ in their filter: two lines of one point
    assert [(x, row["arm"]) for x, row in lines["fdsl"]] == [(30.0, "fdsl_30"), (300.0, "fdsl_300")]


def test_one_panel_per_figure_metric_and_no_axes_for_a_study_without_a_figure():
    two = replace(STUDY, figure=replace(STUDY.figure, metrics=("finetuned.recall@1", "frozen.recall@1")))
    rows = [row | {"frozen.recall@1": (0.1, 0.0)} for row in ROWS]
    assert [axis.get_ylabel() for axis in draw_figure(two, rows).axes] == ["finetuned.recall@1 (%)", "frozen.recall@1 (%)"]
    assert draw_figure(replace(STUDY, figure=None), ROWS).axes == []  # FigureDataset writes no file for it
