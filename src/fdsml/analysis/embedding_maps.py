"""UMAP of fractal embeddings, coloured by class, with one class's perturbation trajectory shown as pictures.

An instance is its class code with ONE parameter rescaled by a factor s (FineFractalDB: one
coefficient position in every map, docs/method.md §2.2). The family recovers the class code
(:meth:`~fdsml.families.Family.class_code`), and sweeping s over the perturbation range at the
same parameter (:meth:`~fdsml.families.Family.rescaled`) traces the path along which the class's
instances lie. Its points are embedded with the class samples and a few
of them are drawn as their renderings, so a reader sees which shapes sit where on the map.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.offsetbox import AnnotationBbox, OffsetImage

from fdsml.families import FamilySpec

logger = logging.getLogger(__name__)


def class_sweep(spec: FamilySpec, rows: pd.DataFrame, factors: np.ndarray) -> tuple[list, np.ndarray, int]:
    """The class code of ``rows`` (one class) with the parameter its first instance perturbed rescaled by
    each factor (the family's sweep hook); factors breaking the family's validity rules are dropped.

    Returns ``(instances, factors kept, the parameter's index)``.
    """
    family, settings = spec.family, spec.settings
    code = family.class_code(rows, settings)
    parameter = family.perturbed_parameter(spec.instance(rows.iloc[0]))
    swept = [family.rescaled(code, parameter, float(s), settings) for s in factors]
    keep = np.array([instance is not None and valid for instance, valid in swept], dtype=bool)
    class_id = rows["class_id"].iloc[0]
    if not keep.any():
        raise ValueError(f"class {class_id}: no factor of the sweep keeps the code valid")
    if not keep.all():
        logger.info("class %s sweep: %d of %d factors break the family's validity rules and are dropped", class_id, (~keep).sum(), keep.size)
    return [instance for (instance, _), k in zip(swept, keep) if k], np.asarray(factors, dtype=np.float64)[keep], parameter


@dataclass(frozen=True)
class EmbeddingMap:
    """One checkpoint's 2-D map: the class samples and the sweep, in one coordinate frame."""

    points: np.ndarray
    labels: np.ndarray
    sweep: np.ndarray


def _class_colours(classes: np.ndarray) -> dict:
    cmap = colormaps["tab10" if len(classes) <= 10 else "tab20"]
    return {label: cmap(i % cmap.N) for i, label in enumerate(classes)}


def _draw_panel(
    ax, name: str, panel: EmbeddingMap, colours: dict, thumbnails: np.ndarray, shown: np.ndarray, factors: np.ndarray
) -> None:
    for label, colour in colours.items():
        chosen = panel.labels == label
        ax.scatter(panel.points[chosen, 0], panel.points[chosen, 1], s=12, color=colour, alpha=0.75, linewidths=0)
    ax.plot(panel.sweep[:, 0], panel.sweep[:, 1], "-", color="black", linewidth=1.0, alpha=0.8)
    ax.scatter(panel.sweep[:, 0], panel.sweep[:, 1], s=10, color="black", zorder=3)
    every = np.vstack([panel.points, panel.sweep])
    (xmin, ymin), (xmax, ymax) = every.min(axis=0), every.max(axis=0)
    xspan, yspan = max(xmax - xmin, 1e-9), max(ymax - ymin, 1e-9)
    ax.set_xlim(xmin - 0.08 * xspan, xmax + 0.08 * xspan)
    ax.set_ylim(ymin - 0.55 * yspan, ymax + 0.06 * yspan)
    slots = np.linspace(xmin + 0.05 * xspan, xmax - 0.05 * xspan, len(shown))
    zoom = min(0.9, 42.0 / thumbnails.shape[-1])
    for slot, index, image in zip(slots, shown, thumbnails):
        ax.text(slot, ymin - 0.5 * yspan, f"s = {factors[index]:.2f}", ha="center", va="center", fontsize="small")
        box = OffsetImage(image, cmap="gray", norm=Normalize(0, 255), zoom=zoom)
        ax.add_artist(
            AnnotationBbox(
                box,
                panel.sweep[index],
                xybox=(slot, ymin - 0.3 * yspan),
                xycoords="data",
                boxcoords="data",
                pad=0.15,
                arrowprops=dict(arrowstyle="->", color="black", linewidth=0.8, shrinkA=0, shrinkB=2),
            )
        )
    ax.set_title(name)
    ax.set_xticks([])
    ax.set_yticks([])


def embedding_map_figure(
    maps: dict[str, EmbeddingMap],
    thumbnails: np.ndarray,
    shown: np.ndarray,
    sweep_factors: np.ndarray,
    *,
    sweep_class: int,
    sweep_parameter: str,
) -> Figure:
    """One UMAP panel per checkpoint; ``thumbnails`` are the renderings of sweep points ``shown``."""
    first = next(iter(maps.values()))
    classes = np.unique(first.labels)
    colours = _class_colours(classes)
    figure = Figure(figsize=(5.2 * len(maps) + 1.6, 5.8), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, len(maps), squeeze=False)[0])
    for ax, (name, panel) in zip(axes, maps.items()):
        _draw_panel(ax, name, panel, colours, thumbnails, shown, sweep_factors)
    handles = [Line2D([], [], marker="o", linestyle="", color=c, label=f"class {k}") for k, c in colours.items()]
    low, high = sweep_factors[shown[0]], sweep_factors[shown[-1]]
    handles.append(Line2D([], [], marker="o", color="black", markersize=4, label=f"class {sweep_class} path"))
    figure.legend(handles=handles, loc="outside right center", fontsize="small")
    figure.suptitle(
        f"UMAP of fractal embeddings, {len(classes)} classes, coloured by class\nblack path: class {sweep_class}'s code "
        f"with parameter {sweep_parameter} scaled by s = {low:.2f} ... {high:.2f}",
        fontsize="medium",
    )
    return figure
