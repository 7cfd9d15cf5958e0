"""The embedding trajectory along a linear interpolation between two codes (docs/method.md §5.7).

The family interpolates, psi(alpha) = (1 - alpha) psi_0 + alpha psi_1, parameter by parameter
(:meth:`fdsml.families.Family.interpolated`; FineFractalDB: map k of one code with map k of the
other, so both codes have the same number of maps, its :meth:`~fdsml.families.Family.interpolation_groups`).
Every alpha is rendered with ONE seed, so what changes along the path is the code, not the
rendering noise. Smoothness is measured in the original embedding space.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from fdsml.analysis.projection import l2_normalise
from fdsml.families import FamilySpec

logger = logging.getLogger(__name__)


def pick_code_pair(table: pd.DataFrame, groups: pd.Series, rng: np.random.Generator) -> tuple[pd.Series, pd.Series]:
    """Two table rows that interpolate (equal ``groups``, the family's interpolation groups): first
    instances of two random classes in one group.

    When no two classes share a group, two instances of one random class (always one group).
    """
    firsts = table.sort_values(["class_id", "instance_id"]).groupby("class_id", sort=True).head(1)
    first_groups = groups.loc[firsts.index]
    sizes = first_groups.groupby(first_groups).transform("size").to_numpy()
    eligible = firsts[sizes >= 2]
    if len(eligible):
        first = eligible.iloc[int(rng.integers(len(eligible)))]
        same_group = groups.loc[eligible.index] == groups.loc[first.name]
        partners = eligible[same_group & (eligible["class_id"] != first["class_id"])]
        return first, partners.iloc[int(rng.integers(len(partners)))]
    counts = table["class_id"].value_counts()
    classes = np.sort(counts[counts >= 2].index.to_numpy())
    if not len(classes):
        raise ValueError("the table holds no two codes that interpolate (no two classes in one group, no class with two instances)")
    rows = table[table["class_id"] == classes[int(rng.integers(len(classes)))]]
    logger.info("no two classes share an interpolation group: interpolating between two instances of class %s", rows["class_id"].iloc[0])
    picked = rng.choice(len(rows), size=2, replace=False)
    return rows.iloc[int(picked[0])], rows.iloc[int(picked[1])]


def interpolated_path(spec: FamilySpec, row_0: pd.Series, row_1: pd.Series, alphas: np.ndarray) -> list:
    """The family's instances from ``row_0`` (alpha 0) to ``row_1`` (alpha 1)."""
    instance_0, instance_1 = spec.instance(row_0), spec.instance(row_1)
    return [spec.family.interpolated(instance_0, instance_1, float(alpha), spec.settings) for alpha in alphas]


def render_path(spec: FamilySpec, instances: list, seed: int) -> np.ndarray:
    """Render every instance of a path with the same ``seed``: (n, size, size) uint8."""
    images = np.empty((len(instances), spec.size, spec.size), dtype=np.uint8)
    for out, instance in zip(images, instances):
        out[...] = spec.render(instance, seed)
    return images


def trajectory_smoothness(embeddings: np.ndarray) -> float:
    """Largest step between consecutive points over the median step (1 = evenly paced; large = a jump).

    Steps are Euclidean distances between consecutive rows of ``embeddings`` as given (pass the
    embedding space the model is used in). A path that never moves scores 1; one whose median
    step is zero but which moves somewhere scores infinity. Compare checkpoints at the same
    number of alphas: a real jump keeps its size while the median step shrinks like 1 / n.
    """
    embeddings = np.asarray(embeddings, dtype=np.float64)
    if embeddings.ndim != 2 or embeddings.shape[0] < 3:
        raise ValueError(f"a trajectory needs at least 3 points as an (n, d) array, got shape {embeddings.shape}")
    steps = np.linalg.norm(np.diff(embeddings, axis=0), axis=1)
    median = float(np.median(steps))
    largest = float(steps.max())
    if median == 0.0:
        return 1.0 if largest == 0.0 else float("inf")
    return largest / median


def normalised_smoothness(embeddings: np.ndarray) -> float:
    """:func:`trajectory_smoothness` on unit-length embeddings (the geometry retrieval compares)."""
    return trajectory_smoothness(l2_normalise(embeddings))


def trajectory_figure(
    projections: dict[str, np.ndarray],
    alphas: np.ndarray,
    smoothness: dict[str, float],
    thumbnails: np.ndarray,
    thumbnail_alphas: np.ndarray,
    *,
    projection: str,
    caption: str,
) -> Figure:
    """Top: renderings at a few alphas. Below: one panel per checkpoint, the path coloured by alpha."""
    n_panels = len(projections)
    figure = Figure(figsize=(max(4.6 * n_panels, 2.0 * len(thumbnails)), 6.8), layout="constrained")
    top, bottom = figure.subfigures(2, 1, height_ratios=[1, 2.6])
    for ax, image, alpha in zip(np.atleast_1d(top.subplots(1, len(thumbnails))), thumbnails, thumbnail_alphas):
        ax.imshow(image, cmap="gray", vmin=0, vmax=255, interpolation="nearest")
        ax.set_title(f"alpha = {alpha:.2f}", fontsize="small")
        ax.set_axis_off()
    top.suptitle(caption, fontsize="medium")
    norm = Normalize(0.0, 1.0)
    cmap = colormaps["viridis"]
    axes = np.atleast_1d(bottom.subplots(1, n_panels, squeeze=False)[0])
    for ax, (name, points) in zip(axes, projections.items()):
        segments = np.stack([points[:-1], points[1:]], axis=1)
        ax.add_collection(LineCollection(segments, colors=cmap(norm(alphas[:-1])), linewidths=1.2, alpha=0.7))
        scatter = ax.scatter(points[:, 0], points[:, 1], c=alphas, cmap=cmap, norm=norm, s=14, zorder=3)
        ax.scatter(*points[0], marker="s", s=70, facecolor="none", edgecolor="black", zorder=4, label="alpha = 0")
        ax.scatter(*points[-1], marker="D", s=70, facecolor="none", edgecolor="black", zorder=4, label="alpha = 1")
        ax.set_title(f"{name}\nlargest / median step = {smoothness[name]:.2f}", fontsize="medium")
        ax.set_xlabel(f"{projection.upper()} 1")
        ax.set_ylabel(f"{projection.upper()} 2")
        ax.legend(fontsize="small", loc="best")
    bottom.colorbar(scatter, ax=list(axes), label="alpha", shrink=0.9)
    bottom.suptitle(
        f"Embedding trajectory ({projection.upper()} of unit-length embeddings); step ratio measured in the full embedding space",
        fontsize="medium",
    )
    return figure
