"""Every axis of a trend added: where the reference's gap to the best rival would be at a point none of the axes
reached (the paper's regime), and how far one axis must grow there for the gap to close.

One least-squares fit over every measured point of every axis, the base point once: the gap at a point is a level
plus, per axis, a slope times log2 of the axis's value over its base value. With one point beyond the base on an axis,
that axis's slope is the line through the two; with more, the points weigh the same, as in each axis's own line
(:mod:`fdsml.tuning.study_trend`). The gap at the target and the slope along ``solve_for`` are then weighted sums of
the measured gaps, so their standard errors follow from the points' own (each point's seeds are its own runs), with
Welch-Satterthwaite degrees of freedom and Student's t, and the closing value gets Fieller's interval. What this
assumes and nothing here tests: that the axes add, each in log2, without interacting (the study moved one at a
time), and that each line holds far beyond what it was measured over; the page says how far. What the points can
test, where there are more of them than lines, is whether the lines pass through them within their noise: the page
gives the point the fit misses most, measured against its own standard error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fdsml.tuning.study_file import StudyDefinition
from fdsml.tuning.study_table import satterthwaite
from fdsml.tuning.study_trend import GAPS, TrendPoint, axis_value, fieller, t95

GAP = GAPS[0]  # the reference minus the best rival: the gap whose sign is the ordering


@dataclass(frozen=True)
class Miss:
    """How far the fit passes from a measured point: its gap minus the fitted one, ± SE on ``df`` degrees of freedom."""

    point: str
    residual: float
    se: float
    df: float

    @property
    def outside_noise(self) -> bool:
        """True when the miss lies outside its 95 % interval: the lines are not straight, or the axes interact, over
        the measured ranges themselves."""
        return abs(self.residual) > t95(self.df) * self.se


@dataclass(frozen=True)
class Projection:
    """A metric's gap at the target (± SE on ``df`` degrees of freedom), how many doublings beyond the measured range
    the target lies along each axis, the ``solve_for`` value where the gap closes with the other axes at the target
    (its 95 % interval; ``None`` bounds are unbounded; None where it does not close as that axis grows), and the
    measured point the fit misses most for its noise (None where there are no more points than lines: an exact fit)."""

    gap: float
    se: float
    df: float
    beyond: dict[str, float]
    crossing: tuple[float, float | None, float | None] | None
    worst_miss: Miss | None


def _design_rows(by_axis: Mapping[str, Sequence[TrendPoint]], bases: Mapping[str, float]) -> tuple[list[list[float]], list[tuple[float, float, float]], list[str]]:
    """The design's rows (1, then log2 of each axis's value over its base: zero but on the point's own axis), the
    gaps and the points' names, every point once (the base point is on every axis) and only where its gap has a
    standard error."""
    rows, gaps, seen = [], [], {}
    for name, points in by_axis.items():
        for point in points:
            gap = point.gaps.get(GAP)
            if point.point in seen or gap is None or math.isnan(gap[0]) or math.isnan(gap[1]):
                continue
            seen[point.point] = None
            rows.append([1.0] + [math.log2(point.x / bases[name]) if other == name else 0.0 for other in by_axis])
            gaps.append(gap)
    return rows, gaps, list(seen)


def _combination(weights: np.ndarray, gaps: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """A weighted sum of the gaps: its value, variance and degrees of freedom (Welch-Satterthwaite)."""
    parts = [(w * w * se * se, df) for w, (_, se, df) in zip(weights, gaps)]
    return float(sum(w * g for w, (g, _, _) in zip(weights, gaps))), sum(v for v, _ in parts), satterthwaite(parts)


def project(by_axis: Mapping[str, Sequence[TrendPoint]], study: StudyDefinition) -> Projection | None:
    """The projection of one metric's points (``by_axis``: each axis's points, as :func:`trend_points` gives them);
    None where some axis has no measured point beyond the base (its slope is unknown, and holding it at its base
    value would be a choice the page does not show)."""
    trend = study.trend
    projection = trend.projection
    bases = {name: axis.points["base"] for name, axis in trend.axes.items()}
    rows, gaps, names = _design_rows(by_axis, bases)
    design = np.array(rows) if rows else np.zeros((0, len(bases) + 1))
    if np.linalg.matrix_rank(design) < len(bases) + 1:
        return None
    solution = np.linalg.pinv(design)  # the coefficients (level, then each axis's slope) are solution @ gaps
    target = np.array([1.0] + [math.log2(projection.target[name] / bases[name]) for name in by_axis])
    gap, variance, df = _combination(target @ solution, gaps)
    column = 1 + list(by_axis).index(projection.solve_for)
    at_base = target.copy()
    at_base[column] = 0.0  # the other axes at the target, solve_for at its base value
    level_weights, slope_weights = at_base @ solution, solution[column]
    level, level_var, level_df = _combination(level_weights, gaps)
    slope, slope_var, slope_df = _combination(slope_weights, gaps)
    covariance = float(sum(a * b * se * se for a, b, (_, se, _) in zip(level_weights, slope_weights, gaps)))
    crossing = None
    if slope != 0 and math.copysign(1, slope) != math.copysign(1, level):
        base = bases[projection.solve_for]
        quantile = t95(min(level_df, slope_df))
        bounds = fieller(level, level_var, slope, slope_var, covariance, quantile)
        crossing = (base * 2 ** (-level / slope), *(None if t is None else float(base * 2**t) for t in bounds))
    beyond = {name: math.log2(projection.target[name] / max(p.x for p in points)) for name, points in by_axis.items()}
    return Projection(gap, math.sqrt(variance), float(df), beyond, crossing, _worst_miss(design, solution, gaps, names))  # type: ignore[arg-type]


def _worst_miss(design: np.ndarray, solution: np.ndarray, gaps: Sequence[tuple[float, float, float]], names: Sequence[str]) -> Miss | None:
    """The point whose residual is largest against its own standard error; each residual is a weighted sum of the
    gaps (a row of I - H, H the fit's hat matrix), so its error follows from theirs. None when the fit is exact."""
    residual_weights = np.eye(len(gaps)) - design @ solution
    misses = []
    for name, weights in zip(names, residual_weights):
        residual, variance, df = _combination(weights, gaps)
        if variance > 1e-12 * sum(se * se for _, se, _ in gaps):  # a point the fit must pass through has no residual to test
            misses.append(Miss(name, residual, math.sqrt(variance), float(df)))
    return max(misses, key=lambda miss: abs(miss.residual) / miss.se, default=None)


def projections(found: Mapping[str, Mapping[str, Mapping[str, Any]]], study: StudyDefinition) -> dict[str, Projection | None]:
    """Per metric of the trend, its projection (:func:`project`), from :func:`trend_results`'s points."""
    return {metric: project({axis: found[axis][metric]["points"] for axis in study.trend.axes}, study) for metric in study.trend.metrics}


def _closing(projection: Projection, axis_label: str) -> str:
    if projection.crossing is None:
        return f"it does not close as {axis_label} grow"
    at, low, high = projection.crossing
    if low is None or high is None:
        return f"{axis_value(at)} (not bounded at 95 %: the slope cannot be told from flat)"
    return f"{axis_value(at)} [{axis_value(low)}, {axis_value(high)}]"


def projection_markdown(found: Mapping[str, Projection | None], study: StudyDefinition) -> str:
    """The page's section: the target, how far beyond the measured ranges it lies, a row per metric."""
    trend = study.trend
    projection = trend.projection
    scale, digits = (100.0 if study.table.percent else 1.0), study.table.digits
    solve_label = trend.axes[projection.solve_for].label
    target = ", ".join(f"{trend.axes[name].label} {axis_value(value)}" for name, value in projection.target.items())
    lines = [f"\n## Every axis added: {projection.label}\n\nAt {target}. One least-squares fit over every point of every axis (the base "
             f"point once): the gap {trend.reference} - best rival as a level plus, per axis, a slope per doubling. It assumes the axes add "
             "without interacting (each was moved alone) and that each line holds far beyond its points; 95 % intervals are Student's t at "
             "the Welch-Satterthwaite degrees of freedom, the closing value's Fieller's. The last column is the measured point the fit misses "
             "most for its noise, measured minus fitted ± SE: outside its 95 % interval, the lines do not hold even over the measured ranges, "
             "and the sum beyond them is the less to be trusted.\n",
             f"| metric | {trend.reference} - best rival there (95 %) | doublings beyond the measured range | {solve_label} where it closes, the other axes there (95 %) | the fit's worst miss |",
             "|---|---:|---|---|---|"]
    for metric, found_projection in found.items():
        if found_projection is None:
            lines.append(f"| {metric} | not every axis has a measured point beyond the base | | | |")
            continue
        p = found_projection
        half = t95(p.df) * p.se if not math.isnan(p.df) else math.nan
        beyond = ", ".join(f"{name} {max(d, 0.0):.1f}" for name, d in p.beyond.items())
        lines.append(f"| {metric} | {scale * p.gap:+.{digits}f} [{scale * (p.gap - half):+.{digits}f}, {scale * (p.gap + half):+.{digits}f}] "
                     f"| {beyond} | {_closing(p, solve_label)} | {_miss(p.worst_miss, scale, digits)} |")
    return "\n".join(lines) + "\n"


def _miss(miss: Miss | None, scale: float, digits: int) -> str:
    if miss is None:
        return "none to test: as many points as lines"
    verdict = "outside its 95 % interval" if miss.outside_noise else "within noise"
    return f"{miss.point} {scale * miss.residual:+.{digits}f} ± {scale * miss.se:.{digits}f} ({verdict})"


def projection_json(found: Mapping[str, Projection | None]) -> dict[str, Any]:
    """The projections as plain data for the study's results JSON."""
    return {metric: (None if p is None else asdict(p)) for metric, p in found.items()}
