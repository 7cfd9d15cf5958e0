"""Descriptor validation: ``kedro run --pipelines=validate_descriptor``."""

from kedro.pipeline import Node, Pipeline

from .nodes import measure_sweeps, measure_triplet_agreement, plot_scatter, plot_sweeps, plot_triplet_grid, summarise


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                func=measure_triplet_agreement,
                inputs=["fractal_codes", "params:fractals", "params:validate_descriptor"],
                outputs="descriptor_triplets",
                name="measure_triplet_agreement_node",
            ),
            Node(
                func=measure_sweeps,
                inputs=["fractal_codes", "params:fractals", "params:validate_descriptor"],
                outputs="descriptor_sweep_points",
                name="measure_sweeps_node",
            ),
            Node(
                func=summarise,
                inputs=["descriptor_triplets", "descriptor_sweep_points", "params:fractals", "params:validate_descriptor"],
                outputs=["descriptor_validation", "descriptor_validation_table"],
                name="summarise_descriptor_validation_node",
            ),
            Node(
                func=plot_sweeps,
                inputs=["descriptor_sweep_points", "params:fractals", "params:validate_descriptor"],
                outputs="descriptor_sweep_plot",
                name="plot_descriptor_sweeps_node",
            ),
            Node(
                func=plot_scatter,
                inputs=["descriptor_sweep_points", "params:fractals", "params:validate_descriptor"],
                outputs="descriptor_scatter_plot",
                name="plot_descriptor_scatter_node",
            ),
            Node(
                func=plot_triplet_grid,
                inputs=["descriptor_triplets", "fractal_codes", "params:fractals", "params:validate_descriptor"],
                outputs="descriptor_triplet_grid",
                name="plot_descriptor_triplet_grid_node",
            ),
        ]
    )
