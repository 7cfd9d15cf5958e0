"""The ``retrieval`` pipeline: ``kedro run --pipelines=retrieval``."""

from kedro.pipeline import Node, Pipeline

from .nodes import draw_retrieval_examples, finetune_starting_points, tabulate_retrieval


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                func=finetune_starting_points,
                inputs=["pretrained_model", "params:retrieval"],
                outputs=["retrieval_metrics", "retrieval_history", "retrieval_models"],
                name="finetune_starting_points_node",
            ),
            Node(func=tabulate_retrieval, inputs="retrieval_metrics", outputs="retrieval_table", name="tabulate_retrieval_node"),
            Node(
                func=draw_retrieval_examples,
                inputs=["retrieval_models", "params:retrieval"],
                outputs="retrieval_examples",
                name="draw_retrieval_examples_node",
            ),
        ]
    )
