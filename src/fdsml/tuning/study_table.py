"""A study's table: a row per arm, each metric's mean ± standard deviation over the seeds, and each row's
difference to a reference arm with its standard error.

The spread is over the values of one seed key (``table.spread``, e.g. the pre-training seed): a
unit's metrics are first averaged over the other seed keys (the fine-tuning seeds), so each
pre-training seed counts once. The difference of arm a to the reference r is mean(a) - mean(r), its
standard error sqrt(s_a^2 / n_a + s_r^2 / n_r) (independent runs, Welch's).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from fdsml.tuning.study_file import StudyDefinition, TableSettings


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (0 for a single value; NaN when a value is: a metric an arm lacks)."""
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0 * values[0]


def difference(values: Sequence[float], reference: Sequence[float]) -> tuple[float, float]:
    """mean(values) - mean(reference) and the difference's standard error (Welch's: sqrt(s_a^2/n_a + s_r^2/n_r))."""
    (mean, std), (base, base_std) = mean_std(values), mean_std(reference)
    return mean - base, math.sqrt(std**2 / len(values) + base_std**2 / len(reference))


def arm_values(results: Sequence[Mapping[str, Any]], table: TableSettings) -> dict[str, dict[str, list[float]]]:
    """Each arm's values of each metric, one per value of the spread key (the other seed keys averaged), in that key's order.

    ``results``: one per unit, ``{"arm", "seeds": {key: value}, "metrics": {name: value}}``; a metric a unit does
    not yield (FDSL mines no triplets) is NaN, shown as n/a.
    """
    groups: dict[str, dict[str, list[Mapping[str, float]]]] = {}
    for result in results:
        key = repr(result["seeds"].get(table.spread)) if table.spread else repr(sorted(result["seeds"].items()))
        groups.setdefault(result["arm"], {}).setdefault(key, []).append(result["metrics"])
    values: dict[str, dict[str, list[float]]] = {}
    for arm, by_seed in groups.items():
        values[arm] = {}
        for metric in table.metrics:
            for runs in by_seed.values():
                values[arm].setdefault(metric, []).append(statistics.mean(run.get(metric, math.nan) for run in runs))
    return values


def study_rows(results: Sequence[Mapping[str, Any]], study: StudyDefinition) -> list[dict[str, Any]]:
    """The table's rows, in the file's arm order: arm, runs, and per metric its mean, std and difference to the reference."""
    table = study.table
    values = arm_values(results, table)
    counts: dict[str, int] = {}
    for result in results:
        counts[result["arm"]] = counts.get(result["arm"], 0) + 1
    shown = table.differences or table.metrics[:1]
    rows = []
    for arm in (arm for arm in study.arms if arm in values):
        row: dict[str, Any] = {"arm": arm, "runs": counts[arm], "spread_n": len(values[arm][table.metrics[0]])}
        for metric in table.metrics:
            row[metric] = mean_std(values[arm][metric])
        if table.reference in values and arm != table.reference:
            for metric in shown:
                row[f"diff {metric}"] = difference(values[arm][metric], values[table.reference][metric])
        rows.append(row)
    return rows


def _scale(table: TableSettings, metric: str) -> float:
    """x 100 for a fraction shown in %, x 1 for seconds (and for every metric without ``table.percent``)."""
    return 100.0 if table.percent and not metric.endswith("seconds") else 1.0


def _cell(value: tuple[float, float], scale: float, digits: int, sign: str = "") -> str:
    mean, spread = value
    return "n/a" if math.isnan(mean) else f"{scale * mean:{sign}.{digits}f} ± {scale * spread:.{digits}f}"


def markdown_table(rows: Sequence[Mapping[str, Any]], study: StudyDefinition) -> str:
    """The rows in Markdown: ``mean ± std`` cells (in % when ``table.percent``), differences as ``+d ± SE``."""
    table = study.table
    shown = (table.differences or table.metrics[:1]) if table.reference else ()
    spread = table.spread or "seed combinations"
    header = ["arm", "runs", f"n ({spread})", *table.metrics, *(f"{metric} - {table.reference} (± SE)" for metric in shown)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for row in rows:
        cells = [row["arm"], str(row["runs"]), str(row["spread_n"])]
        cells += [_cell(row[metric], _scale(table, metric), table.digits) for metric in table.metrics]
        cells += [
            "reference" if row.get(f"diff {metric}") is None else _cell(row[f"diff {metric}"], _scale(table, metric), table.digits, "+")
            for metric in shown
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
