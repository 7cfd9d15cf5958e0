"""The ``classification`` pipeline: ``kedro run --pipelines=classification`` (after ``--pipelines=pretrain``)."""

from kedro.pipeline import Node, Pipeline

from .nodes import finetune_classifiers


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                func=finetune_classifiers,
                inputs=["pretrained_model", "params:classification"],
                outputs=["fine_tuned_classifiers", "classification_metrics", "classification_table", "classification_history"],
                name="finetune_classifiers_node",
            )
        ]
    )
