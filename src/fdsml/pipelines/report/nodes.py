"""Nodes of the ``report`` pipeline: draw the training curves, assemble the Markdown report."""

from __future__ import annotations

import pandas as pd

from fdsml.reporting.report import (
    analysis_section,
    assemble,
    classification_section,
    fractals_section,
    generator_variants_section,
    pa_triplet_study_section,
    pretrain_section,
    pretraining_budget_section,
    retrieval_section,
    training_curves,
    tuning_section,
    validation_section,
)
from fdsml.reporting.provenance import describes


def draw_pretrain_curves(pretrain_history: pd.DataFrame):
    """Loss and learning rate against the step (``pretrain_curves``)."""
    return training_curves(pretrain_history, "pre-training loss")


def write_report(
    fractal_summary: dict,
    pretrain_history: pd.DataFrame,
    pretrained_model: dict,
    descriptor_validation_table: str,
    generator_variants_table: str | None,
    pretraining_budget_table: str | None,
    pa_triplet_study_table: str | None,
    tune_study_table: str | None,
    retrieval_table: str,
    retrieval_metrics: dict,
    classification_table: str,
    classification_metrics: dict,
    robustness_table: str,
    robustness_metrics: dict,
    analysis_metrics: dict,
) -> str:
    """The report (``report``): FineFractalDB, pre-training, descriptor validation, the generator
    variants, the pre-training budget study, the PA-Triplet study and the last tuning study (their tables
    when their benchmarks or the tune pipeline have written them, else how to make them), retrieval, classification and robustness, and pictures of the embeddings.

    A downstream section shows its numbers only when its metrics record that they began from ``pretrained_model`` as
    it is now (:func:`fdsml.reporting.provenance.describes`); otherwise it says it was not run for this checkpoint."""

    def of_this_model(shown, metrics: dict):
        return shown if describes(metrics, pretrained_model) else None

    retrieval_table = of_this_model(retrieval_table, retrieval_metrics)
    classification_table = of_this_model(classification_table, classification_metrics)
    robustness_table = of_this_model(robustness_table, robustness_metrics)
    return assemble(
        [
            fractals_section(fractal_summary),
            pretrain_section(pretrain_history),
            validation_section(descriptor_validation_table),
            generator_variants_section(generator_variants_table),
            pretraining_budget_section(pretraining_budget_table),
            pa_triplet_study_section(pa_triplet_study_table),
            tuning_section(tune_study_table),
            retrieval_section(retrieval_table),
            classification_section(classification_table, robustness_table),
            analysis_section(of_this_model(analysis_metrics, analysis_metrics)),
        ]
    )
