"""The ``fractals`` pipeline: ``kedro run --pipelines=fractals``."""

from kedro.pipeline import Node, Pipeline

from .nodes import generate_fractal_codes, materialize_renderings, render_sample_grid


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                func=generate_fractal_codes,
                inputs=["params:fractals", "fractal_codes_stored", "fractal_summary_stored"],
                outputs=["fractal_codes", "fractal_summary"],
                name="generate_fractal_codes_node",
            ),
            Node(
                func=render_sample_grid,
                inputs=["fractal_codes", "params:fractals"],
                outputs="fractal_samples",
                name="render_sample_grid_node",
            ),
            Node(
                func=materialize_renderings,
                inputs=["fractal_codes", "params:fractals"],
                outputs="fractal_images",
                name="materialize_renderings_node",
            ),
        ]
    )
