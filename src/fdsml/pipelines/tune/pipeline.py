"""The ``tune`` pipeline: ``kedro run --pipelines=tune`` (FineFractalDB, then the study). Not part of ``__default__``."""

from kedro.pipeline import Node, Pipeline

from fdsml.pipelines.fractals import create_pipeline as create_fractals_pipeline

from .nodes import draw_tuning_study, run_tuning_study


def create_pipeline(**kwargs) -> Pipeline:
    return create_fractals_pipeline() + Pipeline(
        [
            Node(
                func=run_tuning_study,
                inputs=["fractal_codes", "fractal_images", "params:fractals", "params:pretrain", "params:retrieval", "params:tune"],
                outputs=["tune_trials", "tune_best_params", "tune_table"],
                name="run_tuning_study_node",
            ),
            Node(
                func=draw_tuning_study,
                inputs=["tune_trials", "params:tune"],
                outputs=["tune_history_plot", "tune_importances_plot", "tune_slices_plot"],
                name="draw_tuning_study_node",
            ),
        ]
    )
