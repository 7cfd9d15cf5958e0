"""The ``pretrain`` pipeline: ``kedro run --pipelines=pretrain`` (FineFractalDB, then training)."""

from kedro.pipeline import Node, Pipeline

from fdsml.pipelines.fractals import create_pipeline as create_fractals_pipeline

from .nodes import pretrain_model


def create_pipeline(**kwargs) -> Pipeline:
    return create_fractals_pipeline() + Pipeline(
        [
            Node(
                func=pretrain_model,
                inputs=["fractal_codes", "fractal_images", "params:fractals", "params:pretrain"],
                outputs=["pretrained_model", "pretrain_history"],
                name="pretrain_model_node",
            )
        ]
    )
