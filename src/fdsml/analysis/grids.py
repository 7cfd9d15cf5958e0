"""Grids of the pre-training data: sample fractals, and sampled triplets per candidate filter.

Both reuse what the dataset and the descriptor validation already define: ``sample_grid``
lays out renderings, ``measure_all_filters`` samples triplets per filter (and measures their
Chamfer distances), ``triplet_grid_figure`` marks the descriptor's positive and negative.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fdsml.families import FamilySpec
from fdsml.families.generation import sample_grid
from fdsml.descriptor_validation.agreement import measure_all_filters
from fdsml.descriptor_validation.plots import triplet_examples, triplet_grid_figure


def sample_grid_figure(table: pd.DataFrame, spec: FamilySpec, n_classes: int, n_instances: int) -> Figure:
    """Rows = the first ``n_classes`` classes, columns = their first ``n_instances`` instances, labelled."""
    border = 2
    grid = sample_grid(table, spec, n_classes, n_instances, border=border)
    classes = sorted(table["class_id"].unique())[:n_classes]
    size = spec.size
    columns = (grid.shape[1] - border) // (size + border)
    tile = size + border
    scale = 1.1 / 64 * max(size, 48)
    figure = Figure(figsize=(scale * columns + 1.2, scale * len(classes) + 0.9), layout="constrained")
    ax = figure.subplots()
    ax.imshow(grid, cmap="gray", vmin=0, vmax=255, interpolation="nearest")
    centres = border + size / 2 + tile * np.arange(max(len(classes), columns))
    ax.set_yticks(centres[: len(classes)], [f"class {c}" for c in classes])
    ax.set_xticks(centres[:columns], [str(i) for i in range(columns)])
    ax.set_xlabel("instance")
    ax.tick_params(length=0)
    ax.set_title(f"{spec.name} samples: each row one class code, each column one perturbed instance")
    return figure


def triplet_grid(table: pd.DataFrame, spec: FamilySpec, per_filter: int, rng: np.random.Generator) -> Figure:
    """``per_filter`` freshly sampled triplets of each filter: anchor, positive (green), negative (red)."""
    triplets = measure_all_filters(table, spec, per_filter, rng)
    return triplet_grid_figure(triplet_examples(triplets, table, spec, per_filter))
