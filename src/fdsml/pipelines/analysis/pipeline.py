"""The ``analysis`` pipeline: ``kedro run --pipelines=analysis`` (pictures of the pre-trained embeddings)."""

from kedro.pipeline import Node, Pipeline

from .nodes import (
    collect_metrics,
    explain_resnets,
    explain_vits,
    plot_embedding_maps,
    plot_sample_grid,
    plot_triplet_grid,
    trace_trajectories,
)


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                func=plot_embedding_maps,
                inputs=["fractal_codes", "pretrained_model", "params:fractals", "params:analysis"],
                outputs="analysis_embedding_map",
                name="plot_embedding_maps_node",
            ),
            Node(
                func=trace_trajectories,
                inputs=["fractal_codes", "pretrained_model", "params:fractals", "params:analysis"],
                outputs=["analysis_trajectory", "analysis_trajectory_metrics"],
                name="trace_trajectories_node",
            ),
            Node(
                func=explain_resnets,
                inputs=["pretrained_model", "params:analysis"],
                outputs=["analysis_gradcam", "analysis_gradcam_similarity", "analysis_gradcam_metrics"],
                name="explain_resnets_node",
            ),
            Node(
                func=explain_vits,
                inputs=["pretrained_model", "params:analysis"],
                outputs="analysis_attention",
                name="explain_vits_node",
            ),
            Node(
                func=plot_sample_grid,
                inputs=["fractal_codes", "params:fractals", "params:analysis"],
                outputs="analysis_sample_grid",
                name="plot_analysis_sample_grid_node",
            ),
            Node(
                func=plot_triplet_grid,
                inputs=["fractal_codes", "params:fractals", "params:analysis"],
                outputs="analysis_triplet_grid",
                name="plot_analysis_triplet_grid_node",
            ),
            Node(
                func=collect_metrics,
                inputs=["analysis_trajectory_metrics", "analysis_gradcam_metrics", "pretrained_model", "params:analysis"],
                outputs="analysis_metrics",
                name="collect_analysis_metrics_node",
            ),
        ]
    )
