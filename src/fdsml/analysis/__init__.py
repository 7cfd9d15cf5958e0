"""Pictures that explain the embeddings (docs/method.md §5.7).

One job per module: ``models`` (checkpoints to analyse, embedding), ``inputs`` (real images as
model input; fractals enter as in pre-training, through ``fdsml.data.fractal_input``),
``projection`` (2-D maps), ``embedding_maps`` (UMAP of classes), ``trajectory`` (code
interpolation, through the family), ``gradcam`` (ResNets), ``attention`` (ViTs), ``grids`` (sample fractals and
sampled triplets).
"""

from fdsml.analysis.attention import attention_figure, attention_probabilities, cls_to_patch_maps
from fdsml.analysis.embedding_maps import class_sweep, embedding_map_figure
from fdsml.analysis.gradcam import (
    grad_cam,
    gradcam_figure,
    map_cosine_similarity,
    prototype_targets,
    similarity_figure,
)
from fdsml.analysis.grids import sample_grid_figure, triplet_grid
from fdsml.analysis.inputs import RealImages, real_images
from fdsml.analysis.models import embed, is_resnet, is_vit, untrained_copy
from fdsml.analysis.projection import l2_normalise, project_2d
from fdsml.analysis.trajectory import (
    interpolated_path,
    pick_code_pair,
    render_path,
    trajectory_figure,
    trajectory_smoothness,
)

__all__ = [
    "RealImages",
    "attention_figure",
    "attention_probabilities",
    "class_sweep",
    "cls_to_patch_maps",
    "embed",
    "embedding_map_figure",
    "grad_cam",
    "gradcam_figure",
    "interpolated_path",
    "is_resnet",
    "is_vit",
    "l2_normalise",
    "map_cosine_similarity",
    "pick_code_pair",
    "project_2d",
    "prototype_targets",
    "real_images",
    "render_path",
    "sample_grid_figure",
    "similarity_figure",
    "trajectory_figure",
    "trajectory_smoothness",
    "triplet_grid",
    "untrained_copy",
]
