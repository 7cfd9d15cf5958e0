"""The ``report`` pipeline: ``kedro run --pipelines=report`` (after the others)."""

from kedro.pipeline import Node, Pipeline

from .nodes import draw_pretrain_curves, write_report


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(func=draw_pretrain_curves, inputs="pretrain_history", outputs="pretrain_curves", name="draw_pretrain_curves_node"),
            Node(
                func=write_report,
                inputs=[
                    "fractal_summary",
                    "pretrain_history",
                    "descriptor_validation_table",
                    "generator_variants_table",
                    "pretraining_budget_table",
                    "pa_triplet_study_table",
                    "tune_study_table",
                    "retrieval_table",
                    "classification_table",
                    "robustness_table",
                    "analysis_metrics",
                ],
                outputs="report",
                name="write_report_node",
            ),
        ]
    )
