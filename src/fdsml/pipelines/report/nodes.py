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


def draw_pretrain_curves(pretrain_history: pd.DataFrame):
    """Loss and learning rate against the step (``pretrain_curves``)."""
    return training_curves(pretrain_history, "pre-training loss")


def write_report(
    fractal_summary: dict,
    pretrain_history: pd.DataFrame,
    descriptor_validation_table: str,
    generator_variants_table: str | None,
    pretraining_budget_table: str | None,
    pa_triplet_study_table: str | None,
    tune_study_table: str | None,
    retrieval_table: str,
    classification_table: str,
    robustness_table: str,
    analysis_metrics: dict,
) -> str:
    """The report (``report``): FineFractalDB, pre-training, descriptor validation, the generator
    variants, the pre-training budget study, the PA-Triplet study and the last tuning study (their tables
    when their benchmarks or the tune pipeline have written them, else how to make them), retrieval, classification and robustness, and pictures of the embeddings."""
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
            analysis_section(analysis_metrics),
        ]
    )
