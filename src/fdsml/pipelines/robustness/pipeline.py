"""The ``robustness`` pipeline: ``kedro run --pipelines=robustness`` (after ``--pipelines=classification``)."""

from kedro.pipeline import Node, Pipeline

from .nodes import evaluate_robustness, plot_corruption_examples, prepare_corrupted_test_set


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                func=prepare_corrupted_test_set,
                inputs=["params:classification", "params:robustness", "corrupted_test_set_stored"],
                outputs="corrupted_test_set",
                name="prepare_corrupted_test_set_node",
            ),
            Node(
                func=evaluate_robustness,
                inputs=["fine_tuned_classifiers", "corrupted_test_set", "params:classification", "params:robustness"],
                outputs=["robustness_errors", "robustness_metrics", "robustness_table"],
                name="evaluate_robustness_node",
            ),
            Node(
                func=plot_corruption_examples,
                inputs=["corrupted_test_set", "params:robustness"],
                outputs="corruption_examples",
                name="plot_corruption_examples_node",
            ),
        ]
    )
