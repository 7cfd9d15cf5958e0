"""Pictures of the descriptor validation, readable at a glance (docs/method.md §6).

Figures are built on ``matplotlib.figure.Figure`` directly (no pyplot state), so nodes can
return them to ``matplotlib.MatplotlibDataset`` without leaking open figures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fdsml.families import FamilySpec
from fdsml.losses.candidates import FILTERS, first_is_positive

POSITION_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:grey")
SEEDING_STYLES = {"common": dict(color="black", marker="o", markersize=3), "fresh": dict(color="tab:grey", marker=".", alpha=0.7)}


def _colour(position: int) -> str:
    return POSITION_COLOURS[position % len(POSITION_COLOURS)]


def sweep_figure(points: pd.DataFrame, base: int, names: tuple[str, ...]) -> Figure:
    """D versus s for each swept parameter (``names``, by position) of one base code; the noise floor dashed."""
    chosen = points[points["base"] == base]
    if chosen.empty:
        raise ValueError(f"no sweep points for base code {base}")
    rows = -(-len(names) // 3)
    figure = Figure(figsize=(12, 3.25 * rows), layout="constrained")
    axes = np.atleast_2d(figure.subplots(rows, 3, sharex=True, squeeze=False))
    floor = float(chosen["noise_floor"].iloc[0])
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    for position, ax in enumerate(axes.flat[: len(names)]):
        panel = chosen[chosen["position"] == position]
        for seeding, group in panel.groupby("seeding"):
            group = group.sort_values("factor")
            ax.plot(group["factor"], group["chamfer"], label=f"{seeding} seed", **SEEDING_STYLES.get(seeding, {}))
        ax.axhline(floor, linestyle="--", color="tab:red", label=f"noise floor {floor:.2f} px")
        ax.axvline(1.0, linestyle=":", color="tab:grey")
        valid = "valid" if panel["contractive"].all() else "leaves the valid set"
        ax.set_title(f"{names[position]} ({valid})")
        ax.set_xlabel("scale factor s")
        ax.set_ylabel("Chamfer D to base (px)")
    axes.flat[0].legend(fontsize="small")
    figure.suptitle(f"Perturbation sweeps of base code {base} (class {chosen['class_id'].iloc[0]})")
    return figure


def scatter_figure(points: pd.DataFrame, names: tuple[str, ...]) -> Figure:
    """D versus d_Psi over every sweep point, coloured by the rescaled parameter (``names``, by position).

    Empty renderings (D pinned to the frame diagonal) are left out and counted in the title;
    invalid points (FineFractalDB: codes that leave contraction) are drawn as crosses.
    """
    figure = Figure(figsize=(7.5, 6), layout="constrained")
    ax = figure.subplots()
    shown = points[~points["empty"] & np.isfinite(points["psi_distance"])]
    for position in range(len(names)):
        group = shown[shown["position"] == position]
        for contractive, marker in ((True, "o"), (False, "x")):
            part = group[group["contractive"] == contractive]
            ax.scatter(part["psi_distance"], part["chamfer"], s=10, marker=marker, color=_colour(position), alpha=0.6, linewidths=0.8)
    handles = [Line2D([], [], color=_colour(p), marker="o", linestyle="", label=n) for p, n in enumerate(names)]
    handles.append(Line2D([], [], color="black", marker="x", linestyle="", label="invalid (non-contractive) point"))
    ax.legend(handles=handles, title="rescaled parameter", fontsize="small")
    ax.set_xlabel("descriptor distance d_Psi to the base")
    ax.set_ylabel("Chamfer D to the base rendering (px)")
    ax.set_title(f"{len(shown)} sweep points ({int(points['empty'].sum())} empty renderings left out)")
    return figure


def triplet_examples(triplets: pd.DataFrame, table: pd.DataFrame, spec: FamilySpec, per_filter: int) -> dict:
    """The first ``per_filter`` measured triplets of each filter, rendered and ordered by the descriptor.

    Returns ``{filter: list of dicts}`` with images ``anchor``, ``positive``, ``negative`` and
    the d_Psi and D of the positive and negative to the anchor.
    """
    examples = {}
    for name in FILTERS:
        chosen = triplets[triplets["filter"] == name].head(per_filter)
        rows = []
        for _, t in chosen.iterrows():
            keep = bool(first_is_positive(t["psi_distance_first"], t["psi_distance_second"]))
            order = ("first", "second") if keep else ("second", "first")
            indices = [int(t["anchor"]), int(t[order[0]]), int(t[order[1]])]
            images = spec.render_rows(table.iloc[indices])
            rows.append(
                {
                    "anchor": images[0],
                    "positive": images[1],
                    "negative": images[2],
                    "psi_distance": (float(t[f"psi_distance_{order[0]}"]), float(t[f"psi_distance_{order[1]}"])),
                    "chamfer": (float(t[f"chamfer_{order[0]}"]), float(t[f"chamfer_{order[1]}"])),
                }
            )
        examples[name] = rows
    return examples


def triplet_grid_figure(examples: dict) -> Figure:
    """One row per filter: anchor, descriptor's positive (green) and negative (red) for a few triplets.

    Each triplet's title says whether the rendered shapes agree (the positive is no farther in D).
    """
    filters = [name for name in examples if examples[name]]
    per_row = max(len(examples[name]) for name in filters)
    figure = Figure(figsize=(2.0 * 3 * per_row, 2.3 * len(filters)), layout="constrained")
    axes = np.atleast_2d(figure.subplots(len(filters), 3 * per_row, squeeze=False))
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_frame_on(False)
    for r, name in enumerate(filters):
        axes[r, 0].set_ylabel(f"filter {name}", fontsize="large")
        for k, example in enumerate(examples[name]):
            agrees = first_is_positive(*example["chamfer"])
            for c, (role, colour) in enumerate((("anchor", "black"), ("positive", "tab:green"), ("negative", "tab:red"))):
                ax = axes[r, 3 * k + c]
                ax.imshow(example[role] > 0, cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
                ax.set_frame_on(True)
                for spine in ax.spines.values():
                    spine.set_color(colour)
                    spine.set_linewidth(3)
                if role == "anchor":
                    ax.set_title("anchor: D " + ("agrees" if agrees else "DISAGREES"), fontsize="small")
                else:
                    i = 0 if role == "positive" else 1
                    distances = f"dPsi {example['psi_distance'][i]:.2f} D {example['chamfer'][i]:.2f}"
                    ax.set_title(f"{role[:3]} {distances}", fontsize="small")
    figure.suptitle("Sampled triplets: descriptor's positive (green) and negative (red)")
    return figure
