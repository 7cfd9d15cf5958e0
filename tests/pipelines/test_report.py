"""The report shows beside the pre-trained model only the downstream numbers computed from it: a section whose
results began from another checkpoint (pre-trained again, retrieval not re-run) says so and names the command."""

from __future__ import annotations

import pandas as pd
import torch

from fdsml.models import build_model, model_payload
from fdsml.models.starting_points import PRETRAINED, start_record
from fdsml.pipelines.report.nodes import write_report

SUMMARY = {
    "title": "FineFractalDB",
    "n_classes": 2,
    "instances_per_class": 3,
    "n_instances": 6,
    "definition": {},
    "instance_acceptance_rate": 1.0,
    "instance_draws": 6,
    "instance_invalid_rejections": 0,
    "instance_occupancy_rejections": 0,
    "occupancy": {"min": 0.1, "median": 0.2, "max": 0.3},
    "seconds": 1.0,
}
HISTORY = pd.DataFrame({"step": [1, 2], "loss": [0.9, 0.5], "lr": [0.1, 0.1], "images_per_s": [10.0, 10.0]})
TABLES = {
    "retrieval_table": "| start | recall@1 |\n|---|---|\n| fdsml | 61.0 |\n",
    "classification_table": "| starting point | digits top-1 |\n|---|---:|\n| fdsml | 97.25 |\n",
    "robustness_table": "| starting point | clean |\n|---|---:|\n| fdsml | 12.75 |\n",
}


def _model(seed: int) -> dict:
    torch.manual_seed(seed)
    return model_payload(build_model("resnet18", embedding_dim=8, img_size=32), objective="pa_triplet")


def _report(pretrained: dict, measured_on: dict) -> str:
    """The report of ``pretrained`` when every downstream result on disk began from ``measured_on``."""
    started = {"scratch": start_record(None, None), "fdsml": start_record(PRETRAINED, measured_on)}
    return write_report(
        SUMMARY, HISTORY, pretrained, "| a | b |\n", None, None, None, None,
        retrieval_table=TABLES["retrieval_table"],
        retrieval_metrics={start: record | {"dataset": "omniglot"} for start, record in started.items()},
        classification_table=TABLES["classification_table"],
        classification_metrics={"results": {"digits": {start: record | {"top1": 0.97} for start, record in started.items()}}},
        robustness_table=TABLES["robustness_table"],
        robustness_metrics={"results": {start: record | {"clean_error": 0.1} for start, record in started.items()}},
        analysis_metrics={"pretrained_model": started["fdsml"], "trajectory": {"largest_over_median_step": {"fdsml": 1.75}}},
    )


def test_every_downstream_section_shows_its_numbers_only_beside_the_model_they_were_computed_from():
    earlier, now = _model(0), _model(1)
    fresh = _report(now, now)
    assert all(table.strip() in fresh for table in TABLES.values()) and "| fdsml | 1.75 |" in fresh
    assert "Not run for this checkpoint" not in fresh
    stale = _report(now, earlier)
    for number in ("61.0", "97.25", "12.75", "1.75"):
        assert number not in stale
    for command in ("retrieval", "classification", "classification,robustness", "analysis"):
        assert f"`kedro run --pipelines={command}` measures it; then run the report again" in stale
    assert "retrieval_examples.png" not in stale and "corruption_examples.png" not in stale


def test_results_that_record_no_starting_model_are_not_shown_beside_it():
    now = _model(1)
    report = write_report(
        SUMMARY, HISTORY, now, "| a | b |\n", None, None, None, None,
        TABLES["retrieval_table"], {"fdsml": {"dataset": "omniglot", "mean": {}}},  # written before fdsml recorded it
        TABLES["classification_table"], {"results": {"digits": {"fdsml": start_record(PRETRAINED, now)}}},
        TABLES["robustness_table"], {"results": {"fdsml": start_record(PRETRAINED, now)}},
        {"pretrained_model": start_record(PRETRAINED, now), "trajectory": {"largest_over_median_step": {}}},
    )
    assert "61.0" not in report and "97.25" in report and "12.75" in report
