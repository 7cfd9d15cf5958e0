"""The ``study`` pipeline: one node running ``conf/studies/<study.name>.yml``. Not part of ``__default__``."""

from kedro.pipeline import Node, Pipeline

from .nodes import run_study_file


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [Node(func=run_study_file, inputs="params:study", outputs=["study_page", "study_results", "study_figure"], name="run_study_node")]
    )
