"""How far one start leads the others as axes of the regime grow: the gaps at every point, their change per doubling,
and where they would close.

For each axis of a study's ``trend`` and each of its metrics, at every point of the axis: the reference start's mean
over the values of ``trend.spread`` (the pre-training seed: the fine-tuning seeds of one trunk averaged first, since
they share it), the best rival's (the rival with the highest mean there), the baseline's and the floor's;
the gaps reference - best rival, reference - baseline and best rival - baseline, each with its standard error and
that error's degrees of freedom (Welch's, :func:`fdsml.tuning.study_table.welch`). Each gap is then fitted by least
squares against log2 of the axis value, every point weighing the same: weights of 1 / SE^2 read from two seeds would
be noise themselves (a point whose two seeds happen to agree would outweigh the others a hundredfold). The slope is
the gap's change per doubling, with its standard error from the points' own and its Welch-Satterthwaite degrees of
freedom. Every interval is Student's t at those degrees of freedom, never the normal's 1.96: with two seeds a start,
a gap's error has one or two. Where the slope points towards zero, the line's zero is the extrapolated crossing,
given with its 95 % Fieller interval (the set of axis values where zero lies within the line's own 95 % band), which
is unbounded where the slope cannot be told from flat. Where it does not, the range it was measured over and the
fastest narrowing the data allow are stated instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure
from scipy.stats import t as student_t

from fdsml.tuning.study_file import StudyDefinition, TableSettings, TrendAxis, TrendSettings, trend_arm
from fdsml.tuning.study_table import arm_values, mean_std, satterthwaite, welch

GAPS = ("reference - best rival", "reference - baseline", "best rival - baseline")


def t95(df: float) -> float:
    """The two-sided 95 % quantile of Student's t at ``df`` degrees of freedom (1.96 at infinity, 12.7 at one)."""
    return float(student_t.ppf(0.975, df))


@dataclass(frozen=True)
class Fit:
    """A gap against log2(axis value): its change per doubling ± SE on ``slope_df`` degrees of freedom, the points it
    rests on, and the crossing (the axis value where the line is zero, with its 95 % interval; ``None`` bounds are
    unbounded) when it narrows: when the line heads towards zero from the range's first point, so that its zero lies
    past that point, within the range (the sign changed where it was measured) or beyond it."""

    slope: float
    slope_se: float
    slope_df: float
    points: int
    low: float
    high: float
    narrows: bool
    crossing: tuple[float, float | None, float | None] | None


def fit_gap(xs: Sequence[float], gaps: Sequence[tuple[float, float, float]]) -> Fit | None:
    """The least-squares line of ``gaps`` (each ``(gap, SE, the SE's degrees of freedom)``, as :func:`welch` gives it)
    against log2 ``xs``, every point weighing the same; None with fewer than two points that have a value and an SE."""
    points = [(math.log2(x), g, e * e, df) for x, (g, e, df) in zip(xs, gaps) if not (math.isnan(g) or math.isnan(e))]
    if len({u for u, _, _, _ in points}) < 2:
        return None
    n = len(points)
    centre = sum(u for u, _, _, _ in points) / n
    spread = sum((u - centre) ** 2 for u, _, _, _ in points)
    coefficients = [(u - centre) / spread for u, _, _, _ in points]  # the slope is sum(coefficient * gap)
    level = sum(g for _, g, _, _ in points) / n  # the line's value at the centre
    slope = sum(c * g for c, (_, g, _, _) in zip(coefficients, points))
    level_parts = [(v / n**2, df) for _, _, v, df in points]
    slope_parts = [(c * c * v, df) for c, (_, _, v, df) in zip(coefficients, points)]
    slope_var = sum(v for v, _ in slope_parts)
    covariance = sum(c * v / n for c, (_, _, v, _) in zip(coefficients, points))  # of the level and the slope
    slope_df = satterthwaite(slope_parts)
    first, last = min(u for u, _, _, _ in points), max(u for u, _, _, _ in points)
    start = level + slope * (first - centre)  # the line at the range's first point
    narrows = slope != 0 and math.copysign(1, slope) != math.copysign(1, start)
    crossing = None
    if narrows:
        quantile = t95(min(slope_df, satterthwaite(level_parts)))
        bounds = fieller(level, sum(v for v, _ in level_parts), slope, slope_var, covariance, quantile)
        crossing = (2 ** (centre - level / slope), *(None if t is None else 2 ** (centre + t) for t in bounds))  # type: ignore[assignment]
    return Fit(slope, math.sqrt(slope_var), slope_df, n, 2**first, 2**last, narrows, crossing)


def fieller(level: float, level_var: float, slope: float, slope_var: float, covariance: float, quantile: float) -> tuple[float | None, float | None]:
    """The 95 % interval of t = -level / slope (the line level + slope t is zero), from Fieller's theorem: the t where
    (level + slope t)^2 <= q^2 (level_var + 2 t covariance + t^2 slope_var), q the 95 % quantile. Unbounded, (None,
    None), when the slope cannot be told from flat at 95 % (the set then reaches infinity)."""
    a = slope**2 - quantile**2 * slope_var
    if not a > 0:
        return None, None
    b = level * slope - quantile**2 * covariance
    root = math.sqrt(max(b * b - a * (level**2 - quantile**2 * level_var), 0.0))
    return (-b - root) / a, (-b + root) / a


@dataclass(frozen=True)
class TrendPoint:
    """One point of an axis for one metric: each start's mean ± std and n, the best rival's name, the three gaps ± SE
    (each ``(gap, SE, the SE's degrees of freedom)``)."""

    point: str
    x: float
    reference: tuple[float, float, int]
    best_rival: str
    rival: tuple[float, float, int]
    baseline: tuple[float, float, int] | None
    floor: tuple[float, float, int] | None
    gaps: dict[str, tuple[float, float, float]]


def _arm_at(study_arms: Mapping[str, Any], start: str, point: str) -> str:
    """The arm of ``start`` at ``point``: its own there, else its base arm (a start that does not vary along the axis)."""
    arm = trend_arm(start, point)
    return arm if arm in study_arms else start


def _summary(values: Sequence[float]) -> tuple[float, float, int]:
    mean, std = mean_std(values)
    return mean, std, len(values)


def trend_points(results: Sequence[Mapping[str, Any]], study: StudyDefinition, axis: TrendAxis, metric: str) -> list[TrendPoint]:
    """The axis's points (in the order of their values) that the reference ran at, for ``metric``."""
    trend = study.trend
    values = arm_values(results, TableSettings(metrics=(metric,), spread=trend.spread))
    baseline_metric = trend.baseline_metrics.get(metric, metric)
    baselines = arm_values(results, TableSettings(metrics=(baseline_metric,), spread=trend.spread))
    found = []
    for point, x in sorted(axis.points.items(), key=lambda item: item[1]):
        reference = values.get(_arm_at(study.arms, trend.reference, point), {}).get(metric)
        rivals = {rival: values[arm][metric] for rival in trend.rivals if (arm := _arm_at(study.arms, rival, point)) in values and _measured(values[arm][metric])}
        if not _measured(reference) or not rivals:  # a point the metric is not measured at (converged at the axis's ends only)
            continue
        best = max(rivals, key=lambda rival: _nan_low(mean_std(rivals[rival])[0]))
        baseline = baselines.get(_arm_at(study.arms, trend.baseline, point), {}).get(baseline_metric) if trend.baseline else None
        floor = values.get(_arm_at(study.arms, trend.floor, point), {}).get(metric) if trend.floor else None
        gaps = {GAPS[0]: welch(reference, rivals[best])}
        if baseline:
            gaps |= {GAPS[1]: welch(reference, baseline), GAPS[2]: welch(rivals[best], baseline)}
        found.append(TrendPoint(point, x, _summary(reference), best, _summary(rivals[best]), baseline and _summary(baseline), floor and _summary(floor), gaps))
    return found


def _measured(values: Sequence[float] | None) -> bool:
    """Whether a start has a value of the metric at a point: some seed's is a number."""
    return bool(values) and not all(math.isnan(value) for value in values)


def _nan_low(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def trend_fits(points: Sequence[TrendPoint]) -> dict[str, Fit | None]:
    """Each gap's line over the points."""
    return {gap: fit_gap([p.x for p in points if gap in p.gaps], [p.gaps[gap] for p in points if gap in p.gaps]) for gap in GAPS}


def trend_results(results: Sequence[Mapping[str, Any]], study: StudyDefinition) -> dict[str, dict[str, dict[str, Any]]]:
    """Per axis and metric, the points and the fits, as the page and the JSON results hold them."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for name, axis in study.trend.axes.items():
        for metric in study.trend.metrics:
            points = trend_points(results, study, axis, metric)
            found.setdefault(name, {})[metric] = {"points": points, "fits": trend_fits(points)}
    return found


def _value(found: tuple[float, float, int] | None, scale: float, digits: int) -> str:
    if found is None or math.isnan(found[0]):
        return "n/a"
    mean, std, n = found
    return f"{scale * mean:.{digits}f}" + (f" ± {scale * std:.{digits}f}" if n > 1 else " (1 run)")


def _gap(found: tuple[float, float, float] | None, scale: float, digits: int) -> str:
    return "n/a" if found is None or math.isnan(found[0]) else f"{scale * found[0]:+.{digits}f} ± {scale * found[1]:.{digits}f}"


def axis_value(x: float) -> str:
    """An axis value as a reader takes it in: whole above 100 or where whole, else three significant figures (a
    crossing at 60.4 px, not 60.3857: its interval is far wider than the digits); from a billion on, two significant
    figures and a power of ten (an extrapolated bound at 1.1e+33 parameters, not 34 digits of it)."""
    if x >= 1e9:
        return f"{x:.2g}"
    return f"{x:,.0f}" if x >= 100 or float(x).is_integer() else f"{x:.3g}"


def describe_fit(gap: str, fit: Fit | None, trend: TrendSettings, axis: TrendAxis, scale: float, digits: int) -> str:
    """One sentence on a gap's line: its change per doubling, and the crossing or the range it did not narrow over."""
    names = {"reference": trend.reference, "best rival": "the best rival", "baseline": trend.baseline or "baseline"}
    label = " - ".join(names[part] for part in gap.split(" - "))
    if fit is None:
        return f"{label}: fewer than two points, no trend."
    change = (f"{scale * fit.slope:+.{digits}f} ± {scale * fit.slope_se:.{digits}f} per doubling of {axis.label} ({fit.points} points, "
              f"{axis_value(fit.low)} to {axis_value(fit.high)}; the SE on {fit.slope_df:.1f} degrees of freedom)")
    if fit.crossing is not None:
        at, low, high = fit.crossing
        if low is None or high is None:
            return f"{label}: {change}; it narrows by its estimate, but the slope cannot be told from flat at 95 %, so no crossing is bounded (the line's zero: {axis_value(at)})."
        interval = f"{axis_value(at)} [{axis_value(low)}, {axis_value(high)}]"
        if fit.low <= at <= fit.high:
            return f"{label}: {change}; it changes sign within the range, at {interval} (95 %, between the points)."
        return f"{label}: {change}; it narrows, and would close at {interval} (95 %, extrapolated)."
    fastest = max(0.0, t95(fit.slope_df) * fit.slope_se - abs(fit.slope))  # the slope has the gap's sign here, or is flat
    if round(scale * fastest, digits) == 0:  # the interval excludes any narrowing the shown digits could name
        return f"{label}: {change}; it does not narrow over this range (95 %: it widens)."
    return f"{label}: {change}; it does not narrow over this range (95 %: by at most {scale * fastest:.{digits}f} per doubling)."


def trend_markdown(found: Mapping[str, Mapping[str, Mapping[str, Any]]], study: StudyDefinition) -> str:
    """The trend section of the study's page: a table per axis and metric, and a sentence per gap."""
    trend, table = study.trend, study.table
    scale, digits = (100.0 if table.percent else 1.0), table.digits
    samples = f"values of `{trend.spread}` (the other seeds averaged first)" if trend.spread else "every seed combination"
    lines = [f"\n## How the gaps change along each axis\n\nGaps as differences of means over the {samples} ± their standard error; "
             f"the best rival is the best of {', '.join(trend.rivals)} at each point; the lines are least-squares fits against log2 of the axis, "
             "every point weighing the same; every 95 % interval is Student's t at the Welch-Satterthwaite degrees of freedom of its "
             "standard error (with two seeds a start, one or two for a gap: 4.3 to 12.7 standard errors each side).\n"]
    for name, by_metric in found.items():
        axis = trend.axes[name]
        for metric, entry in by_metric.items():
            header = ["point", axis.label, trend.reference, "best rival", *([trend.baseline] if trend.baseline else []), *([trend.floor] if trend.floor else []),
                      f"{trend.reference} - best rival", *([f"{trend.reference} - {trend.baseline}", f"best rival - {trend.baseline}"] if trend.baseline else [])]
            lines += [f"\n**{name}: {metric}**\n", "| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
            for p in entry["points"]:
                cells = [p.point, axis_value(p.x), _value(p.reference, scale, digits), f"{p.best_rival} {_value(p.rival, scale, digits)}"]
                cells += [_value(p.baseline, scale, digits)] if trend.baseline else []
                cells += [_value(p.floor, scale, digits)] if trend.floor else []
                cells += [_gap(p.gaps.get(gap), scale, digits) for gap in (GAPS if trend.baseline else GAPS[:1])]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
            lines += [f"- {describe_fit(gap, entry['fits'][gap], trend, axis, scale, digits)}" for gap in (GAPS if trend.baseline else GAPS[:1])]
    return "\n".join(lines) + "\n"


def trend_json(found: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The trend as plain data for the study's results JSON."""
    return {
        axis: {
            metric: {"points": [vars(p) for p in entry["points"]], "fits": {gap: (None if fit is None else vars(fit)) for gap, fit in entry["fits"].items()}}
            for metric, entry in by_metric.items()
        }
        for axis, by_metric in found.items()
    }


def draw_trend(found: Mapping[str, Mapping[str, Mapping[str, Any]]], study: StudyDefinition) -> Figure:
    """The gaps against each axis (log2), points with their 95 % intervals (Student's t): a row per metric, a column per axis."""
    trend = study.trend
    scale = 100.0 if study.table.percent else 1.0
    axes_names, metrics = list(trend.axes), list(trend.metrics)
    figure = Figure()
    figure.set_size_inches(4.2 * len(axes_names), 3.4 * len(metrics))
    panels = figure.subplots(len(metrics), len(axes_names), squeeze=False)
    labels = {GAPS[0]: f"{trend.reference} - best rival", GAPS[1]: f"{trend.reference} - {trend.baseline}", GAPS[2]: f"best rival - {trend.baseline}"}
    for row, metric in enumerate(metrics):
        for column, name in enumerate(axes_names):
            panel, points = panels[row][column], found[name][metric]["points"]
            for offset, gap in zip((-0.04, 0.0, 0.04), GAPS):
                shown = [p for p in points if gap in p.gaps and not math.isnan(p.gaps[gap][0])]
                if shown:
                    panel.errorbar([math.log2(p.x) + offset for p in shown], [scale * p.gaps[gap][0] for p in shown],
                                   yerr=[t95(p.gaps[gap][2]) * scale * p.gaps[gap][1] for p in shown], marker="o", capsize=3, label=labels[gap])
            panel.axhline(0.0, color="grey", linewidth=0.8)
            ticks = sorted(trend.axes[name].points.values())
            panel.set_xticks([math.log2(x) for x in ticks], [axis_value(x) for x in ticks])
            panel.set_xlabel(f"{trend.axes[name].label} (log2 scale)")
            panel.set_ylabel(f"gap in {metric}" + (" (points)" if study.table.percent else ""))
            panel.set_title(f"{name}: {metric}", fontsize=9)
            panel.grid(alpha=0.3)
    panels[0][0].legend(fontsize=7)
    figure.suptitle("Gaps between starts along each axis (± 95 % intervals, Student's t)")
    figure.tight_layout()
    return figure
