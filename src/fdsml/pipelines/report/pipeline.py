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
                    "pretrained_model",
                    "descriptor_validation_table",
                    "generator_variants_table",
                    "pretraining_budget_table",
                    "pa_triplet_study_table",
                    "tune_study_table",
                    "retrieval_table",
                    "retrieval_metrics",
                    "classification_table",
                    "classification_metrics",
                    "robustness_table",
                    "robustness_metrics",
                    "analysis_metrics",
                ],
                outputs="report",
                name="write_report_node",
            ),
        ]
    )
