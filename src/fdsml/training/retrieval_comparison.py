"""The retrieval comparison the pipeline runs and a researcher reads (docs/retrieval.md, "What the table says").

Before any work it says what will run (:func:`recipe_notes`, the plan's notes too) and refuses a
dataset too small for the recipe (:func:`check_recipe_fits`). Each start then fine-tunes at its own
rate: set by hand (``starts[i].base_lr``), chosen on a validation split of the training classes
(``retrieval.rate_search``, :mod:`fdsml.training.rate_search`), or the shared ``optimizer.base_lr``.
Beside the fine-tuned runs, on the same test split and view: raw pixels and each start's frozen
trunk (:mod:`fdsml.evaluation.baselines`). Each fine-tuned start's Recall@1 is compared with theirs
query by query, and a start that did not beat them by more than the noise gets its verdict line
(:mod:`fdsml.training.comparison`), in the log, the table and the report.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from fdsml import distributed
from fdsml.config import ConfigError
from fdsml.data import ImageRecords, RetrievalSplits
from fdsml.evaluation.baselines import pixel_vectors
from fdsml.evaluation.embedding import retrieval_split_scores
from fdsml.evaluation.frozen_probe import trunk_features
from fdsml.evaluation.noise import paired_difference
from fdsml.models.starting_points import StartingPoint, start_payload
from fdsml.training.comparison import (
    is_searched,
    rates_note,
    FROZEN,
    PIXELS,
    cell,
    difference_rows,
    likely_fault,
    rate_cell,
    rate_record,
    rate_search_rows,
    seed_summary,
    seeds_note,
    verdict,
    verdict_paragraphs,
    versus_record,
)
from fdsml.training.finetune import FineTuneRun, at_start_rate, defining_start, finetune, starting_model
from fdsml.training.live import live_metrics
from fdsml.training.rate_search import RateChoice, choose_rate, hold_out_classes
from fdsml.training.retrieval import (
    RetrievalConfig,
    budget_note,
    evaluate,
    fine_tuning,
    finetune_run,
    finetune_start,
    load_splits,
    plan_retrieval,
    rate_source,
    sized_to_data,
)

logger = logging.getLogger(__name__)

RATE_METRIC = "map@r"
"""Retrieval's rates are chosen by MAP@R: Recall@1 saturates on a small validation split (docs/study-fair-comparison.md)."""
COMPARED = "recall@1"
"""The figure each start is compared with its baselines on, query by query (a hit or not: its noise is exact)."""


def _class_sizes(records: ImageRecords) -> str:
    counts = np.unique(records.labels, return_counts=True)[1]
    per_class = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()} to {counts.max()}"
    return f"{len(counts):,} classes of {per_class} images ({len(records):,})"


def recipe_notes(config: RetrievalConfig, splits: RetrievalSplits | None = None) -> list[str]:
    """What each start's fine-tuning will be: its budget, batch, data, rates and baselines (the plan's notes, the run's first line)."""
    notes = [
        budget_note(config),
        f"batch: {config.data.batch_size} training images drawn at random a step; {config.loss.name} pulls each image to its "
        "class's proxy, not to another image of its class, so a class of one or two images fills it",
    ]
    if splits is not None:
        test = splits.gallery if splits.has_query_set else splits.test
        notes.append(f"data: training {_class_sizes(splits.train)}; test {_class_sizes(test)}")
    return notes + [
        rates_note(config, config.starts, rate_source, task="retrieval", by=RATE_METRIC, on="the training classes"),
        f"baselines: raw pixels (k-NN, the test view at most {config.baselines.pixel_size} px a side) and each start's "
        "frozen trunk, on the same test split and view",
    ]


def _scored_queries(splits: RetrievalSplits) -> int:
    """The queries with another image of their class to find (the others can neither succeed nor fail)."""
    if splits.has_query_set:
        return int(np.isin(splits.query.labels, splits.gallery.labels).sum())
    labels, counts = np.unique(splits.test.labels, return_counts=True)
    return int(counts[counts >= 2].sum())


def check_recipe_fits(config: RetrievalConfig, splits: RetrievalSplits, world_size: int) -> None:
    """Refuse, before any work and naming the keys to change, a dataset too small for the recipe: a batch or a head-only
    warm-up its training split cannot fill, a test split with no query to score, a rate search it cannot hold out."""
    config = sized_to_data(config)
    plan = plan_retrieval(config, len(splits.train), world_size)
    problems = plan.problems()
    if _scored_queries(splits) < 2:
        problems.append(
            f"{splits.name}: fewer than two test images have another image of their class, so Recall@K has nothing to "
            "score; give each test class at least two images (retrieval.data.train_classes moves classes between the splits)"
        )
    if any(is_searched(config, start) for start in config.starts):
        train, _ = hold_out_classes(splits.train, config.rate_search, "retrieval.rate_search")
        searched = plan_retrieval(config, len(train), world_size)
        problems += [f"the rate search's training part: {problem}" for problem in searched.problems()]
    if problems:
        raise ConfigError("; ".join(problems))


def search_rate(config: RetrievalConfig, splits: RetrievalSplits, start: StartingPoint, pretrained: dict | None) -> RateChoice:
    """``start``'s rate, chosen by MAP@R on training classes held out of its training split (the first seed, the same
    recipe); each rate's run lives in ``<dataset>/rate_search/<start>_lr<rate>_seed<seed>``, reused or resumed as any run."""
    search = config.rate_search
    train, validation = hold_out_classes(splits.train, search, "retrieval.rate_search")
    held_out = RetrievalSplits(splits.name, train, (1,), test=validation)
    seed = config.seeds[0]

    def score(rate: float) -> dict[str, float]:
        rated = replace(start, base_lr=rate)
        task = fine_tuning(at_start_rate(config, rated), int(train.labels.max()) + 1)
        folder = f"{splits.name}/rate_search/{start.name}_lr{rate:g}_seed{seed}"
        result, _ = finetune(task, train, FineTuneRun(rated, seed, folder, {"start": defining_start(rated), "seed": seed}), pretrained=pretrained)
        return evaluate(result.model, held_out, config, seed)

    classes = len(np.unique(validation.labels))
    where = f"{classes} of the {len(np.unique(splits.train.labels))} training classes held out ({len(validation)} images)"
    return choose_rate(search, RATE_METRIC, score, where)


def pixel_scores(config: RetrievalConfig, splits: RetrievalSplits) -> tuple[dict[str, float], np.ndarray]:
    """The raw-pixel baseline: k-NN on the test view's pixels, scored as the fine-tuned embeddings are."""
    view, data = config.data.transform(train=False), config.data
    return retrieval_split_scores(
        lambda records: pixel_vectors(records, view, config.baselines.pixel_size, batch_size=data.eval_batch_size, workers=data.eval_workers),
        splits,
        seed=config.seeds[0],
        threads=data.faiss_threads,
    )


def frozen_scores(
    config: RetrievalConfig, splits: RetrievalSplits, start: StartingPoint, pretrained: dict | None
) -> tuple[dict[str, Any], list[np.ndarray]]:
    """``start``'s trunk before fine-tuning, its pooled features scored on the test split: once for a checkpoint's trunk,
    once per seed for a random one (each seed draws its own). Returns the per-seed summary and each seed's Recall@1 hits."""
    task = fine_tuning(at_start_rate(config, start), int(splits.train.labels.max()) + 1)
    payload = start_payload(start, pretrained)
    device = distributed.resolve_device(config.train.device, distributed.current().local_rank)
    view, data = config.data.transform(train=False), config.data
    per_seed, hits = {}, []
    for seed in config.seeds if payload is None else config.seeds[:1]:
        model = starting_model(task, finetune_run(splits.name, start, seed), payload)
        features = lambda records, model=model: trunk_features(  # noqa: E731
            model, records, view, batch_size=data.eval_batch_size, device=device, workers=data.eval_workers
        )
        per_seed[str(seed)], seed_hits = retrieval_split_scores(features, splits, seed=seed, threads=data.faiss_threads)
        hits.append(seed_hits)
    return seed_summary(per_seed), hits


def retrieval_comparison(config: RetrievalConfig, pretrained: dict | None = None) -> tuple[dict, pd.DataFrame, dict[str, dict]]:
    """Every start fine-tuned at its own rate with every seed, beside raw pixels and its frozen trunk.

    Returns the metrics (``{start: {"dataset", "rate", "steps", "queries", "seeds", "mean", "std", "baselines", "versus",
    "verdict"}}``), the fine-tuning histories and the first seed's model file per start.
    """
    config = sized_to_data(config)
    splits = load_splits(config)
    context = distributed.setup(config.train.device)
    check_recipe_fits(config, splits, context.world_size)
    logger.info("Retrieval on %s: %s", splits.name, "; ".join(recipe_notes(config, splits)))
    choices = {}
    for start in config.starts:
        if is_searched(config, start):
            choices[start.name] = choice = search_rate(config, splits, start, pretrained)
            logger.info("%s: rate %g chosen on %s (%.0f s): %s", start.name, choice.chosen, choice.validation, choice.seconds,
                        ", ".join(f"{rate:g} {100 * found[RATE_METRIC]:.1f}" for rate, found in choice.scores.items()))  # fmt: skip
    starts = [replace(start, base_lr=choices[start.name].chosen) if start.name in choices else start for start in config.starts]
    live = live_metrics(config.live_dir, config, context)
    results = [finetune_start(config, splits, start, pretrained, live) for start in starts]
    pixels, pixel_hits = pixel_scores(config, splits)
    noise = config.baselines.noise_ses
    metrics = {}
    for result in results:
        name, choice = result.start.name, choices.get(result.start.name)
        frozen, frozen_hits = frozen_scores(config, splits, result.start, pretrained)
        versus = {
            PIXELS: (pixels[COMPARED], paired_difference(result.hits, [pixel_hits])),
            FROZEN: (frozen["mean"][COMPARED], paired_difference(result.hits, frozen_hits)),
        }
        first_seed = result.history[result.history["seed"] == config.seeds[0]]
        fault = likely_fault(first_seed, result.plan, noise, task="retrieval", searched=choice is not None)
        value = float(np.mean([found[COMPARED] for found in result.per_seed.values()]))
        line = verdict(name, "Recall@1", value, versus, noise, fault, f"{len(pixel_hits):,} queries")
        if line:
            logger.warning("%s", line)
        source = "chosen on validation" if choice is not None else rate_source(config, result.start)
        rate = rate_record(at_start_rate(config, result.start).optimizer.base_lr, result.plan, source, choice)
        metrics[name] = result.record(splits.name, rate) | {
            "queries": len(pixel_hits),
            "baselines": {PIXELS: {"mean": pixels, "std": None}, FROZEN: frozen},
            "versus": versus_record(versus, COMPARED),
            "verdict": line,
        }
    return metrics, pd.concat([r.history for r in results], ignore_index=True), {r.start.name: r.model for r in results}


def comparison_table(metrics: dict) -> str:
    """Markdown: the dataset; raw pixels, then each start frozen and fine-tuned, with its rate; each fine-tuned start's
    Recall@1 minus its baselines' with the standard error; the rate searches; every verdict line."""
    first = next(iter(metrics.values()))
    names, seeds = list(first["mean"]), len(first["seeds"])
    lines = [
        f"Retrieval on `{first['dataset']}`: each start fine-tuned ({first['steps']} steps) beside raw pixels and its "
        f"frozen trunk, on the same {first['queries']:,} scored test queries and test view; {seeds_note(seeds)}; in %.",
        "",
        "| | rate | " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * len(names),
        f"| {PIXELS} (k-NN) | | " + " | ".join(cell(first["baselines"][PIXELS], n) for n in names) + " |",
    ]
    for start, result in metrics.items():
        lines.append(f"| {start}, frozen trunk | | " + " | ".join(cell(result["baselines"][FROZEN], n) for n in names) + " |")
        lines.append(f"| {start}, fine-tuned | {rate_cell(result['rate'])} | " + " | ".join(cell(result, n) for n in names) + " |")
    lines += [
        "",
        "Recall@1 of each fine-tuned start minus its baselines', ± the standard error of the difference (paired over the "
        "same queries" + (", and over the seeds" if seeds > 1 else "") + "):",
        "",
        *difference_rows(metrics),
        *rate_search_rows(metrics, "the test classes"),
        *_left_out_rows(first),
    ]
    return "\n".join(lines) + "\n" + verdict_paragraphs(metrics)


def _left_out_rows(result: dict) -> list[str]:
    """The queries Recall@K, MAP@R and R-Precision leave out (nothing of their class to find), when there are any."""
    left_out = result.get("queries_left_out", 0)
    return ["", f"Queries with no other image of their class to find, left out of Recall@K, MAP@R and R-Precision: {left_out}."] if left_out else []
