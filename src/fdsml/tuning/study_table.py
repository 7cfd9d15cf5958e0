"""A study's table: a row per arm, each metric's mean ± standard deviation over the seeds, and each row's
difference to a reference arm with its standard error.

The spread is over the values of one seed key (``table.spread``, e.g. the pre-training seed): a
unit's metrics are first averaged over the other seed keys (the fine-tuning seeds), so each
pre-training seed counts once. The difference of arm a to the reference r is mean(a) - mean(r), its
standard error sqrt(s_a^2 / n_a + s_r^2 / n_r) (independent runs, Welch's); with ``table.paired`` (arms that
share their seeds, e.g. one model trained in two precisions) it is the mean of the per-seed differences a - r
over the seeds both ran, its standard error their standard deviation over sqrt(n). A study may add columns: a
metric's std over every seed combination (``every_combination``: nothing averaged first, e.g. every
(pre-training, fine-tuning) seed pair), a gain from one metric to another per spread value with the
smallest gain over three binomial standard errors (``gain``), and a proportion's 95 % Wilson interval
(``intervals``); the last two need each unit's number of trials: the metric's own ``<metric>.trials`` when
its step yields one (the ``same`` filter per perturbed position), else ``trials``, a parameter's value.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from fdsml.descriptor_validation.agreement import wilson_interval
from fdsml.tuning.study_file import StudyDefinition, TableSettings


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (0 for a single value; NaN when a value is: a metric an arm lacks)."""
    if any(math.isnan(value) for value in values):
        return math.nan, math.nan
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def difference(values: Sequence[float], reference: Sequence[float]) -> tuple[float, float]:
    """mean(values) - mean(reference) and the difference's standard error (:func:`welch`)."""
    return welch(values, reference)[:2]


def welch(values: Sequence[float], reference: Sequence[float]) -> tuple[float, float, float]:
    """mean(values) - mean(reference), its standard error (Welch's: sqrt(s_a^2/n_a + s_r^2/n_r)) and that error's
    degrees of freedom (:func:`satterthwaite`); both NaN, never measured, when each side ran once. A side that ran
    once counts as exact: an unseeded baseline (raw pixels)."""
    (mean, std), (base, base_std) = mean_std(values), mean_std(reference)
    if len(values) == len(reference) == 1:
        return mean - base, math.nan, math.nan
    parts = [(std**2 / len(values), len(values) - 1), (base_std**2 / len(reference), len(reference) - 1)]
    return mean - base, math.sqrt(sum(variance for variance, _ in parts)), satterthwaite(parts)


def satterthwaite(parts: Sequence[tuple[float, float]]) -> float:
    """The degrees of freedom of a sum of independent variance estimates, each ``(variance, its degrees of freedom)``:
    (sum v)^2 / sum(v^2 / df) (Welch-Satterthwaite). Two seeds give each estimate one degree of freedom, so a 95 %
    interval is up to 12.7 standard errors wide, not 1.96. Parts without degrees of freedom (a run once) count as
    exact; when every variance is 0, the parts' degrees of freedom summed (NaN where there are none)."""
    measured = [(variance, df) for variance, df in parts if df > 0]
    total = sum(variance for variance, _ in measured)
    if total == 0:
        return float(sum(df for _, df in measured)) or math.nan
    return total**2 / sum(variance**2 / df for variance, df in measured)


def paired_difference(values: Mapping[str, float], reference: Mapping[str, float]) -> tuple[float, float]:
    """The mean of the differences ``values[seed] - reference[seed]`` over the seeds both hold, and its standard error
    (their sample standard deviation over sqrt(n); NaN for fewer than two pairs)."""
    differences = [values[seed] - reference[seed] for seed in values if seed in reference]
    if len(differences) < 2:
        return (differences[0] if differences else math.nan), math.nan
    return statistics.mean(differences), statistics.stdev(differences) / math.sqrt(len(differences))


def seed_values(results: Sequence[Mapping[str, Any]], table: TableSettings) -> dict[str, dict[str, dict[str, float]]]:
    """Each arm's values of each metric (the table's and the gain's) by the value of the spread key (the other seed keys
    averaged), in the order the units came.

    ``results``: one per unit, ``{"arm", "seeds": {key: value}, "metrics": {name: value}}``; a metric a unit does
    not yield (FDSL mines no triplets) is NaN, shown as n/a.
    """
    groups: dict[str, dict[str, list[Mapping[str, float]]]] = {}
    for result in results:
        key = repr(result["seeds"].get(table.spread)) if table.spread else repr(sorted(result["seeds"].items()))
        groups.setdefault(result["arm"], {}).setdefault(key, []).append(result["metrics"])
    ends = (table.gain.start, table.gain.end) if table.gain else ()
    return {
        arm: {
            metric: {seed: statistics.mean(run.get(metric, math.nan) for run in runs) for seed, runs in by_seed.items()}
            for metric in dict.fromkeys((*table.metrics, *ends))
        }
        for arm, by_seed in groups.items()
    }


def arm_values(results: Sequence[Mapping[str, Any]], table: TableSettings) -> dict[str, dict[str, list[float]]]:
    """:func:`seed_values` as lists, one value per value of the spread key."""
    return {arm: {metric: list(by_seed.values()) for metric, by_seed in metrics.items()} for arm, metrics in seed_values(results, table).items()}


def study_rows(results: Sequence[Mapping[str, Any]], study: StudyDefinition) -> list[dict[str, Any]]:
    """The table's rows, in the order of its ``arms`` (or the file's): arm, runs, and per metric its mean, std and
    difference to the reference."""
    table = study.table
    by_seed = seed_values(results, table)
    values = arm_values(results, table)
    counts: dict[str, int] = {}
    for result in results:
        counts[result["arm"]] = counts.get(result["arm"], 0) + 1
    shown = table.differences or table.metrics[:1]
    rows = []
    for arm in (arm for arm in (study.arms if table.arms is None else table.arms) if arm in values):
        row: dict[str, Any] = {"arm": arm, "runs": counts[arm], "spread_n": len(values[arm][table.metrics[0]])}
        for metric in table.metrics:
            row[metric] = mean_std(values[arm][metric])
        if table.reference in values and arm != table.reference:
            for metric in shown:
                row[f"diff {metric}"] = (
                    paired_difference(by_seed[arm][metric], by_seed[table.reference][metric])
                    if table.paired
                    else difference(values[arm][metric], values[table.reference][metric])
                )
        mine = [result for result in results if result["arm"] == arm]
        row |= _added_statistics(mine, values[arm], table)
        rows.append(row)
    return rows


def _added_statistics(results: Sequence[Mapping[str, Any]], values: Mapping[str, list[float]], table: TableSettings) -> dict[str, Any]:
    """One arm's columns beyond mean ± std: ``every_combination``'s spreads, the gain, the Wilson intervals."""
    added: dict[str, Any] = {}
    for metric in table.every_combination:
        added[f"every {metric}"] = mean_std([result["metrics"].get(metric, math.nan) for result in results])[1]
    if table.gain is not None:
        added["gain"] = gain(values[table.gain.start], values[table.gain.end], min(result["trials"][table.trials] for result in results))
    for metric in table.intervals:
        counts = [result["metrics"].get(f"{metric}.trials") or result["trials"][table.trials] for result in results]
        trials = sum(counts)
        successes = sum(result["metrics"].get(metric, math.nan) * count for result, count in zip(results, counts))
        added[f"interval {metric}"] = (math.nan, math.nan) if math.isnan(successes) else wilson_interval(successes, trials)
    return added


def gain(starts: Sequence[float], ends: Sequence[float], trials: int) -> dict[str, Any]:
    """end - start per spread value, their mean ± std, and the smallest gain over 3 binomial standard errors of the
    largest-variance end (sqrt(p(1-p)/trials)): above 1, no seed's gain is within the estimate's noise."""
    gains = [end - start for start, end in zip(starts, ends)]
    error = max(math.sqrt(end * (1 - end) / trials) for end in ends)
    ratio = min(gains) / (3 * error) if error > 0 else math.nan
    return {"gains": gains, "mean_std": mean_std(gains), "min_over_3se": ratio}


def _scale(table: TableSettings, metric: str) -> float:
    """x 100 for a fraction shown in %, x 1 for seconds (``cpu_seconds.*`` too), counts (``n_*``) and every metric
    without ``table.percent``."""
    last = metric.rsplit(".", 1)[-1]
    counted = metric.endswith("seconds") or metric.startswith("cpu_seconds.") or last.startswith("n_")
    return 100.0 if table.percent and not counted else 1.0


def _cell(value: tuple[float, float], scale: float, digits: int, sign: str = "", n: int = 2) -> str:
    """``mean ± std``; the value alone over a single run (``n`` 1), whose spread was never measured."""
    mean, spread = value
    if math.isnan(mean):
        return "n/a"
    return f"{scale * mean:{sign}.{digits}f}" + (f" ± {scale * spread:.{digits}f}" if n > 1 else "")


def _difference_cell(row: Mapping[str, Any], metric: str, table: TableSettings) -> str:
    """The row's difference to the reference; "reference" on the reference's own row, n/a when it did not run."""
    if row["arm"] == table.reference:
        return "reference"
    found = row.get(f"diff {metric}")
    if found is not None and math.isnan(found[1]) and not math.isnan(found[0]):
        return f"{_scale(table, metric) * found[0]:+.{table.digits}f} (no SE: one run each)"
    return "n/a" if found is None else _cell(found, _scale(table, metric), table.digits, "+")


def markdown_table(rows: Sequence[Mapping[str, Any]], study: StudyDefinition) -> str:
    """The rows in Markdown: ``mean ± std`` cells (in % when ``table.percent``), differences as ``+d ± SE``; no rows
    (a page drawn before any of the table's units is complete) is a line saying so, not a bare header."""
    if not rows:
        return "No unit of this table is complete yet.\n"
    table = study.table
    shown = (table.differences or table.metrics[:1]) if table.reference else ()
    spread = table.spread or "seed combinations"
    error = "paired SE" if table.paired else "SE"
    header = ["arm", "runs", f"n ({spread})", *table.metrics, *(f"{metric} - {table.reference} (± {error})" for metric in shown)]
    header += _added_headers(table)
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for row in rows:
        cells = [row["arm"], str(row["runs"]), str(row["spread_n"])]
        cells += [_cell(row[metric], _scale(table, metric), table.digits, n=row["spread_n"]) for metric in table.metrics]
        cells += [_difference_cell(row, metric, table) for metric in shown]
        cells += _added_cells(row, table)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _added_headers(table: TableSettings) -> list[str]:
    headers = [f"{metric} std, every seed combination" for metric in table.every_combination]
    if table.gain is not None:
        headers.append(f"{table.gain.end} - {table.gain.start} per {table.spread or 'seed combination'}; min gain / 3 SE")
    return headers + [f"{metric} 95 % CI" for metric in table.intervals]


def _added_cells(row: Mapping[str, Any], table: TableSettings) -> list[str]:
    digits = table.digits
    cells = [_number(row[f"every {metric}"], _scale(table, metric), digits) for metric in table.every_combination]
    if table.gain is not None:
        found, scale = row["gain"], _scale(table, table.gain.end)
        each = ", ".join(_number(value, scale, digits, "+") for value in found["gains"])
        cells.append(f"{_cell(found['mean_std'], scale, digits, '+')} ({each}); {_number(found['min_over_3se'], 1.0, 1)}")
    for metric in table.intervals:
        low, high = row[f"interval {metric}"]
        scale = _scale(table, metric)
        cells.append("n/a" if math.isnan(low) else f"[{scale * low:.{digits}f}, {scale * high:.{digits}f}]")
    return cells


def _number(value: float, scale: float, digits: int, sign: str = "") -> str:
    return "n/a" if math.isnan(value) else f"{scale * value:{sign}.{digits}f}"
