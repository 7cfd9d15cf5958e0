"""A study's picture (``figure`` of its file): each metric of the table against a dotted key the arms set.

The arms that set ``figure.x`` and share every other key of their overlays are one line (the budget
study's ``fdsl_30``, ``fdsl_100``, ``fdsl_300``: one line named ``fdsl``, their names' common prefix without
trailing digits),
each point the arm's mean ± std over the spread; an arm that does not set ``x`` (scratch) is a band.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from fdsml.tuning.study_file import StudyDefinition, parameter_overlay_keys


def figure_series(study: StudyDefinition, rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, list[tuple[float, Mapping]]], dict[str, Mapping]]:
    """The lines (name: their (x, row) points in x's order) and the bands (arm: its row) the figure draws."""
    assert study.figure is not None
    lines: dict[tuple, list[tuple[str, float, Mapping]]] = {}
    bands: dict[str, Mapping] = {}
    for row in rows:
        keys = parameter_overlay_keys(study.arms[row["arm"]])
        if study.figure.x not in keys:
            bands[row["arm"]] = row
            continue
        shared = tuple(sorted((key, repr(value)) for key, value in keys.items() if key != study.figure.x))
        lines.setdefault(shared, []).append((row["arm"], float(keys[study.figure.x]), row))
    named = {}
    for points in lines.values():
        prefix = os.path.commonprefix([arm for arm, _, _ in points]).rstrip("0123456789_- .") if len(points) > 1 else ""
        named[prefix or points[0][0]] = sorted(((x, row) for _, x, row in points), key=lambda point: point[0])
    return named, bands


def draw_figure(study: StudyDefinition, rows: Sequence[Mapping[str, Any]]) -> Figure:
    """One panel per metric of ``figure.metrics`` (in % when ``table.percent``); a figure without axes, which
    the catalog writes as no file (:class:`fdsml.catalog_datasets.FigureDataset`), when the study has no ``figure``."""
    figure = Figure()
    if study.figure is None:
        return figure
    lines, bands = figure_series(study, rows)
    metrics = study.figure.metrics
    scale = 100.0 if study.table.percent else 1.0
    figure.set_size_inches(5.5 * len(metrics), 4.2)
    axes = figure.subplots(1, len(metrics), squeeze=False)
    for axis, metric in zip(axes[0], metrics):
        for arm, row in bands.items():
            mean, std = row[metric]
            axis.axhspan(scale * (mean - std), scale * (mean + std), alpha=0.15, color="grey")
            axis.axhline(scale * mean, color="grey", linestyle="--", label=f"{arm} (± std)")
        for name, points in lines.items():
            xs = [x for x, _ in points]
            axis.errorbar(xs, [scale * row[metric][0] for _, row in points], yerr=[scale * row[metric][1] for _, row in points], marker="o", capsize=3, label=name)
        axis.set_xlabel(study.figure.x)
        axis.set_ylabel(metric + (" (%)" if study.table.percent else ""))
        axis.set_title(f"{metric} (± std over {study.table.spread or 'seed combinations'})", fontsize=9)
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    if study.figure.title:
        figure.suptitle(study.figure.title)
    figure.tight_layout()
    return figure
