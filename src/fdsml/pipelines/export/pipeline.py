"""The ``export`` pipeline: ``kedro run --pipelines=export`` (after ``pretrain``; ``retrieval`` of this model adds its metrics to the card)."""

from kedro.pipeline import Node, Pipeline

from .nodes import export_backbone


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                func=export_backbone,
                inputs=[
                    "pretrained_model",
                    "pretrain_history",
                    "retrieval_table_if_any",
                    "retrieval_metrics_if_any",
                    "params:export",
                ],
                outputs="exported_backbone",
                name="export_backbone_node",
            )
        ]
    )
