"""What a fine-tuning comparison says beside its numbers, for retrieval and classification alike.

* **Spreads only where measured**: a figure of one seed is shown alone and the table says "1 seed";
  two or more seeds show mean ± standard deviation (:func:`seed_summary`, :func:`cell`).
* **Baselines**: each fine-tuned start is compared, item by item, with raw pixels and with its own
  frozen trunk on the same test split and view (:func:`fdsml.evaluation.noise.paired_difference`).
* **A verdict**: a start that ends within ``baselines.noise_ses`` standard errors of a baseline, or below
  it, gets one line, "fine-tuning did not help: ...", with the numbers and the knob its own training
  history points at (:func:`likely_fault`): a loss that never fell (the rate), a loss still falling
  at the end (too few steps), or a loss that settled without a gain (the rate or the batch).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fdsml.config import require_positive
from fdsml.evaluation.noise import Difference
from fdsml.models.starting_points import StartingPoint
from fdsml.training.finetune import at_start_rate
from fdsml.training.rate_search import RateChoice
from fdsml.training.training_plan import TrainingPlan


@dataclass(frozen=True)
class BaselineSettings:
    """``<task>.baselines``: how raw pixels are read, and how many standard errors a gain must clear."""

    pixel_size: int = 64  # raw pixels: the test view, shrunk by area to at most this many pixels a side
    noise_ses: float = 2.0  # a fine-tuned start less than this many standard errors above a baseline did not help

    def __post_init__(self):
        require_positive("pixel_size", self.pixel_size)
        require_positive("noise_ses", self.noise_ses)


def is_searched(config: Any, start: StartingPoint) -> bool:
    """Whether ``start``'s rate is chosen by the task's rate search: one is configured and the start has no rate of its own."""
    return config.rate_search is not None and start.base_lr is None


def rates_note(
    config: Any, starts: tuple[StartingPoint, ...], source: Callable[[Any, StartingPoint], str], *, task: str, by: str, on: str
) -> str:
    """Each start's fine-tuning rate and the key it comes from (``source``), or how ``task``'s rate search will choose it:
    ``by`` a metric, ``on`` what it holds out."""
    fixed = [f"{s.name} {at_start_rate(config, s).optimizer.base_lr:g} ({source(config, s)})" for s in starts if not is_searched(config, s)]
    searched = [s.name for s in starts if is_searched(config, s)]
    if searched:
        search = config.rate_search
        fixed.append(
            f"{', '.join(searched)} chosen by {by} from {', '.join(f'{r:g}' for r in search.rates)} on "
            f"{search.validation_fraction:.0%} of {on} held out ({task}.rate_search: {len(search.rates)} more fine-tunings a start)"
        )
    return "rates: " + "; ".join(fixed)


def seed_summary(per_seed: dict[str, dict[str, float]]) -> dict[str, Any]:
    """``{"seeds", "mean", "std"}`` of one figure set per seed; ``std`` is None for one seed (no spread was measured)."""
    table = pd.DataFrame(per_seed).T
    spread = table.std(ddof=1).to_dict() if len(table) > 1 else None
    return {"seeds": per_seed, "mean": table.mean().to_dict(), "std": spread}


def cell(summary: dict[str, Any], name: str, scale: float = 100.0, digits: int = 1) -> str:
    """A table cell: the value alone for one seed, ``mean ± std`` for two or more."""
    mean, spread = summary["mean"][name], summary.get("std")
    shown = f"{scale * mean:.{digits}f}"
    return shown if spread is None else f"{shown} ± {scale * spread[name]:.{digits}f}"


def seeds_note(seeds: int) -> str:
    """What a table's cells are: ``1 seed`` (no spread measured) or ``mean ± std over N seeds``."""
    return "1 seed, no spread measured" if seeds == 1 else f"mean ± standard deviation over {seeds} seeds"


def rate_key(task: str, starts_key: str, starts: tuple[StartingPoint, ...], start: StartingPoint) -> str:
    """The key ``start``'s rate comes from: its own ``base_lr`` in ``task``'s list ``starts_key``, or the task's
    ``optimizer.base_lr``; what a table's rate cell and the run's note name, so a reader knows which key to change."""
    if start.base_lr is None:
        return f"{task}.optimizer.base_lr"
    return f"{task}.{starts_key}[{[s.name for s in starts].index(start.name)}].base_lr"


def rate_record(base_lr: float, plan: TrainingPlan, source: str, choice: RateChoice | None = None) -> dict[str, Any]:
    """What the metrics keep of a start's fine-tuning rate: its ``base_lr``, the scaled rate the plan trained at, where it
    came from (the key, or the search), and the search's record."""
    record = {"base_lr": base_lr, "learning_rate": plan.learning_rate, "source": source}
    return record | ({"search": choice.as_dict()} if choice is not None else {})


def rate_cell(rate: dict[str, Any]) -> str:
    """``3e-04 (chosen on validation)`` or ``0.001 (retrieval.optimizer.base_lr)``."""
    return f"{rate['base_lr']:.3g} ({rate['source']})"


def _tenths(losses: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tenth = max(len(losses) // 10, 2)
    return losses[:tenth], losses[-2 * tenth : -tenth], losses[-tenth:]


def _fell(before: np.ndarray, after: np.ndarray, noise_ses: float) -> bool:
    """Whether ``after``'s mean loss lies more than ``noise_ses`` standard errors below ``before``'s."""
    se = math.sqrt(before.var(ddof=1) / len(before) + after.var(ddof=1) / len(after))
    return before.mean() - after.mean() > noise_ses * se


def likely_fault(history: pd.DataFrame, plan: TrainingPlan, noise_ses: float, *, task: str, searched: bool) -> str:
    """The knob a fine-tuning that did not help most likely got wrong, read off its own losses (the first tenth of the
    steps, the tenth before the last, the last): one that never fell points at the rate, one still falling at the end
    at too few steps, one that settled without a gain at the rate or the batch. ``task`` prefixes the keys named."""
    losses = history["loss"].dropna().to_numpy(dtype=np.float64) if "loss" in history else np.array([])
    steps = f"{plan.total_steps} steps of {plan.global_batch} images"
    rate_fix = (
        "the search's rates did not hold a better one: widen " + f"{task}.rate_search.rates"
        if searched
        else f"search it ({task}.rate_search) or set the start's base_lr"
    )
    if len(losses) < 6:
        return f"too few steps ({steps}: too few to read a trend); raise {task}.train.epochs or max_steps"
    first, previous, last = _tenths(losses)
    trend = f"loss {first.mean():.3f} -> {last.mean():.3f}"
    if not _fell(first, last, noise_ses):
        return f"the rate (the {trend} did not fall over {steps}); {rate_fix}"
    if _fell(previous, last, noise_ses):
        return (
            f"too few steps (the {trend} was still falling at the end: {previous.mean():.3f} -> {last.mean():.3f} over the "
            f"last two tenths of {steps}); raise {task}.train.epochs or max_steps"
        )
    return (
        f"the rate or the batch (the {trend} settled over {steps}: more steps would not move it); a lower rate keeps "
        f"more of the trunk ({rate_fix}), a larger batch ({plan.keys.batch}) steadies each step"
    )


def verdict(
    start: str, metric: str, value: float, versus: dict[str, tuple[float, Difference]], noise_ses: float, fault: str, scored: str
) -> str | None:
    """``fine-tuning did not help: ...`` when ``value`` (``metric`` of the fine-tuned ``start``) is not more than
    ``noise_ses`` standard errors above every baseline of ``versus`` (name -> (its value, the difference)); else None.
    ``scored`` names the items (``48 queries``): the smallest gain they could tell from noise is said too."""
    failed = {name: found for name, found in versus.items() if not found[1].helped(noise_ses)}
    if not failed:
        return None
    against = " and ".join(f"{name} at {100 * base:.1f} % ({difference.describe()})" for name, (base, difference) in failed.items())
    resolution = 100 * noise_ses * max(difference.se for _, difference in failed.values())
    return (
        f"fine-tuning did not help: {start} fine-tuned reaches {metric} {100 * value:.1f} %, against {against}: within "
        f"{noise_ses:g} standard errors or below (on these {scored} a gain under {resolution:.1f} points cannot be told "
        f"from noise); most likely at fault: {fault}"
    )


def versus_record(versus: dict[str, tuple[float, Difference]], metric: str) -> dict[str, dict[str, Any]]:
    """What the metrics keep of each comparison: the metric, the baseline's value, the difference and its standard error."""
    return {name: {"metric": metric, "baseline": base, **difference.as_dict()} for name, (base, difference) in versus.items()}


PIXELS, FROZEN = "raw pixels", "its frozen trunk"
"""The two baselines every fine-tuned start is compared with, as the tables and metrics name them."""


def difference_rows(results: dict[str, dict[str, Any]]) -> list[str]:
    """Table rows: each start's compared figure minus each baseline's, ± the standard error of the difference."""
    rows = [f"| start | - {PIXELS} | - {FROZEN} |", "|---|---:|---:|"]
    for start, result in results.items():
        found = [result["versus"][name] for name in (PIXELS, FROZEN)]
        rows.append(f"| {start} | " + " | ".join(f"{100 * d['difference']:+.1f} ± {100 * d['se']:.1f}" for d in found) + " |")
    return rows


def rate_search_rows(results: dict[str, dict[str, Any]], never: str) -> list[str]:
    """The rate searches' table (empty when none ran): every rate's validation figure, the choice and the search's seconds;
    ``never`` names what the search never read (the test classes, the test images)."""
    searched = {start: result["rate"]["search"] for start, result in results.items() if "search" in result["rate"]}
    if not searched:
        return []
    rates = list(dict.fromkeys(rate for search in searched.values() for rate in search["rates"]))
    first = next(iter(searched.values()))
    rows = [
        "",
        f"Rates chosen on validation ({first['metric']}, %, on {first['validation']}; never {never}):",
        "",
        "| start | " + " | ".join(rates) + " | chosen | search seconds |",
        "|---|" + "---:|" * (len(rates) + 2),
    ]
    for start, search in searched.items():
        cells = [f"{100 * search['rates'][rate][search['metric']]:.1f}" if rate in search["rates"] else "" for rate in rates]
        rows.append(f"| {start} | " + " | ".join(cells) + f" | {search['chosen']:g} | {search['seconds']:.0f} |")
    return rows


def verdict_paragraphs(results: dict[str, dict[str, Any]]) -> str:
    """Every verdict line of ``results``, each a sentence of its own under the table."""
    return "".join(f"\n{line[0].upper()}{line[1:]}.\n" for line in (result.get("verdict") for result in results.values()) if line)
