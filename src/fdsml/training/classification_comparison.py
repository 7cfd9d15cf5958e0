"""The classification comparison the pipeline runs and a researcher reads (docs/classification.md, "What the table says").

As retrieval's (:mod:`fdsml.training.retrieval_comparison`): it says first what will run and refuses a
dataset too small for the recipe before any work; each start fine-tunes at its own rate (its
``base_lr``, one chosen by top-1 on images held out of each training class by
``classification.rate_search``, or ``optimizer.base_lr``); beside it, on the same test images and
view, a nearest-centroid classifier on raw pixels and on the start's frozen trunk
(:mod:`fdsml.evaluation.baselines`); its top-1 is compared with theirs image by image, and a start
that did not beat them by more than the noise gets its "fine-tuning did not help" line.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from fdsml import distributed
from fdsml.config import ConfigError
from fdsml.data.classification_datasets import ClassificationSplits
from fdsml.evaluation.baselines import class_sums, nearest_centroid_scores, pixel_vectors
from fdsml.evaluation.frozen_probe import trunk_features
from fdsml.evaluation.noise import paired_difference
from fdsml.models import model_from_payload
from fdsml.models.starting_points import StartingPoint, recorded_start, start_payload
from fdsml.training.classification import (
    ClassificationConfig,
    DatasetSettings,
    check_starting_points,
    classify_start,
    eval_transform,
    evaluate_classifier,
    fine_tuning,
    finetune_classifier,
    finetune_run,
    plan_classification,
    rate_source,
    read_datasets,
    start_plans,
)
from fdsml.training.comparison import (
    is_searched,
    rates_note,
    FROZEN,
    PIXELS,
    difference_rows,
    likely_fault,
    rate_cell,
    rate_record,
    rate_search_rows,
    seeds_note,
    verdict,
    verdict_paragraphs,
    versus_record,
)
from fdsml.training.finetune import FineTuneRun, at_start_rate, defining_start, starting_model
from fdsml.training.live import live_metrics
from fdsml.training.rate_search import RateChoice, choose_rate, hold_out_images
from fdsml.training.training_plan import check_plans

logger = logging.getLogger(__name__)

RATE_METRIC = COMPARED = "top1"
"""Rates are chosen, and starts compared with their baselines, by top-1 accuracy (image by image: a hit or not)."""


def recipe_notes(config: ClassificationConfig, splits: ClassificationSplits | None = None) -> list[str]:
    """What each start's fine-tuning will be on one dataset: its budget, data, rates and baselines."""
    budget = config.train.max_steps
    notes = [
        f"budget: {budget} steps (classification.train.max_steps)"
        if budget is not None
        else f"budget: {config.train.epochs} epochs of the training split (classification.train.epochs)"
    ]
    if splits is not None:
        counts = np.bincount(splits.train.labels, minlength=splits.num_classes)
        notes.append(
            f"data: {splits.num_classes:,} classes, {counts.min()} to {counts.max()} training images each "
            f"({len(splits.train):,}), {len(splits.test):,} test images"
        )
    return notes + [
        rates_note(config, config.starting_points, rate_source, task="classification", by="top-1", on="each training class"),
        f"baselines: nearest-centroid classifiers on raw pixels (the test view at most {config.baselines.pixel_size} px a "
        "side) and on each start's frozen trunk, fitted on the training split, on the same test images and view",
    ]


def check_recipe_fits(config: ClassificationConfig, read: dict[str, ClassificationSplits], world_size: int) -> None:
    """Refuse, before any work and naming the keys to change, a dataset too small for the recipe: a plan it cannot fill
    (every start's, at its own rate), a rate search that cannot hold images out of its training classes."""
    check_plans(list(start_plans(config, read, world_size).values()))
    if not any(is_searched(config, start) for start in config.starting_points):
        return
    problems = []
    for name, splits in read.items():
        train, _ = hold_out_images(splits.train, config.rate_search, f"classification.rate_search ({name})")
        plan = plan_classification(config, name, len(train), world_size)
        problems += [f"the rate search's training part: {problem}" for problem in plan.problems()]
    if problems:
        raise ConfigError("; ".join(problems))


def search_rate(
    config: ClassificationConfig, dataset: DatasetSettings, splits: ClassificationSplits, start: StartingPoint, pretrained: dict | None
) -> RateChoice:
    """``start``'s rate on ``dataset``, chosen by top-1 on images held out of each training class (the same recipe); each
    rate's run lives in ``<dataset>/rate_search/<start>_lr<rate>``, reused or resumed as any run."""
    search = config.rate_search
    train, validation = hold_out_images(splits.train, search, f"classification.rate_search ({dataset.name})")
    held_out = ClassificationSplits(splits.name, train, validation, splits.num_classes, splits.class_names)

    def score(rate: float) -> dict[str, float]:
        rated = replace(start, base_lr=rate)
        defines = {"dataset": dataset, "start": defining_start(rated)}
        run = FineTuneRun(rated, config.train.seed, f"{dataset.name}/rate_search/{start.name}_lr{rate:g}", defines)
        payload, _ = finetune_classifier(held_out, rated, config, dataset=dataset, pretrained=pretrained, run=run)
        return evaluate_classifier(model_from_payload(payload), validation, config)

    where = f"{len(validation):,} images held out of the training classes, {len(train):,} left to train on"
    return choose_rate(search, RATE_METRIC, score, where)


def _vectors(config: ClassificationConfig, embed) -> Any:
    """``embed(records, view, batch_size, workers)`` at the classifiers' test view."""
    view = eval_transform(config.image_size, config.augment.crop_fraction)
    return lambda records: embed(records, view, batch_size=config.eval_batch_size, workers=config.eval_workers)


def centroid_scores(vectors_of, splits: ClassificationSplits) -> tuple[dict[str, float], np.ndarray]:
    """A nearest-centroid classifier on ``vectors_of``'s vectors, fitted on the training split and scored on the test split
    (rank 0 computes, every replica receives)."""
    sums = class_sums(vectors_of, splits.train, splits.num_classes)
    test = vectors_of(splits.test)
    return distributed.on_main_rank(lambda: nearest_centroid_scores(sums, test, splits.test.labels), distributed.current())


def pixel_scores(config: ClassificationConfig, splits: ClassificationSplits) -> tuple[dict[str, float], np.ndarray]:
    """The raw-pixel baseline: a nearest-centroid classifier on the test view's pixels."""
    side = config.baselines.pixel_size
    return centroid_scores(_vectors(config, lambda records, view, **kw: pixel_vectors(records, view, side, **kw)), splits)


def frozen_scores(
    config: ClassificationConfig, splits: ClassificationSplits, start: StartingPoint, pretrained: dict | None
) -> tuple[dict[str, float], np.ndarray]:
    """``start``'s trunk before fine-tuning (drawn from the training seed when random), its pooled features under a
    nearest-centroid classifier."""
    task = fine_tuning(at_start_rate(config, start), splits.name, splits.num_classes)
    model = starting_model(task, finetune_run(config, splits.name, start), start_payload(start, pretrained))
    device = distributed.resolve_device(config.train.device, distributed.current().local_rank)
    features = lambda records, view, **kw: trunk_features(model, records, view, device=device, **kw)  # noqa: E731
    return centroid_scores(_vectors(config, features), splits)


def classification_comparison(
    config: ClassificationConfig, pretrained: dict | None = None
) -> tuple[dict[str, dict], dict[str, Any], pd.DataFrame]:
    """Every start fine-tuned at its own rate on every dataset, beside raw pixels and its frozen trunk.

    Returns ``(models, metrics, history)`` as :func:`~fdsml.training.classification.run_classification` does, each
    ``metrics[dataset][start]`` also holding its ``baselines``, ``versus`` (the top-1 differences) and ``verdict``.
    """
    check_starting_points(config.starting_points)
    context = distributed.setup(config.train.device)
    read = read_datasets(config)
    check_recipe_fits(config, read, context.world_size)  # every dataset before any trains
    live = live_metrics(config.live_dir, config, context)
    noise = config.baselines.noise_ses
    models, metrics, histories = {}, {}, []
    for dataset in config.datasets:
        splits = read[dataset.name]
        logger.info("Classification on %s: %s", dataset.name, "; ".join(recipe_notes(config, splits)))
        pixels, pixel_hits = pixel_scores(config, splits)
        metrics[dataset.name] = {}
        for start in config.starting_points:
            choice = search_rate(config, dataset, splits, start, pretrained) if is_searched(config, start) else None
            rated = start if choice is None else replace(start, base_lr=choice.chosen)
            if choice is not None:
                logger.info("%s on %s: rate %g chosen on %s (%.0f s): %s", start.name, dataset.name, choice.chosen, choice.validation,
                            choice.seconds, ", ".join(f"{r:g} {100 * found[RATE_METRIC]:.1f}" for r, found in choice.scores.items()))  # fmt: skip
            plan = start_plans(replace(config, starting_points=(rated,)), {dataset.name: splits}, context.world_size)[dataset.name, start.name]
            result = classify_start(config, dataset, splits, rated, plan.check(), pretrained=pretrained, live=live)
            frozen, frozen_hits = frozen_scores(config, splits, rated, pretrained)
            versus = {
                PIXELS: (pixels[COMPARED], paired_difference([result.hits], [pixel_hits])),
                FROZEN: (frozen[COMPARED], paired_difference([result.hits], [frozen_hits])),
            }
            fault = likely_fault(result.history, plan, noise, task="classification", searched=choice is not None)
            scored = f"{len(result.hits):,} test images"
            line = verdict(f"{start.name} on {dataset.name}", "top-1", result.scores[COMPARED], versus, noise, fault, scored)
            if line:
                logger.warning("%s", line)
            source = "chosen on validation" if choice is not None else rate_source(config, start)
            models[f"{dataset.name}/{start.name}"] = result.payload
            metrics[dataset.name][start.name] = {
                **result.scores,
                "steps": result.payload["metadata"]["steps"],
                "rate": rate_record(at_start_rate(config, rated).optimizer.base_lr, plan, source, choice),
                "images": len(result.hits),
                "baselines": {PIXELS: pixels, FROZEN: frozen},
                "versus": versus_record(versus, COMPARED),
                "verdict": line,
                **recorded_start(result.payload),  # which trunk these numbers belong to
            }
            histories.append(result.history)
    return models, metrics, pd.concat(histories, ignore_index=True)


def comparison_table(metrics: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Markdown, one block per dataset: raw pixels, then each start frozen and fine-tuned with its rate (top-1 / top-5, %),
    each start's top-1 minus its baselines' with the standard error, the rate searches, and every verdict line."""
    blocks = []
    for dataset, starts in metrics.items():
        first = next(iter(starts.values()))
        lines = [
            f"Classification on `{dataset}`: each start fine-tuned ({first['steps']} steps) beside nearest-centroid classifiers "
            f"on raw pixels and on its frozen trunk, on the same {first['images']:,} test images and view; {seeds_note(1)}; in %.",
            "",
            "| | rate | top-1 | top-5 |",
            "|---|---|---:|---:|",
            f"| {PIXELS} (nearest centroid) | | {_pair(first['baselines'][PIXELS])} |",
        ]
        for start, result in starts.items():
            lines.append(f"| {start}, frozen trunk (nearest centroid) | | {_pair(result['baselines'][FROZEN])} |")
            lines.append(f"| {start}, fine-tuned | {rate_cell(result['rate'])} | {_pair(result)} |")
        lines += [
            "",
            "Top-1 of each fine-tuned start minus its baselines', ± the standard error of the difference (paired over the same images):",
            "",
            *difference_rows(starts),
            *rate_search_rows(starts, "the test images"),
        ]
        blocks.append("\n".join(lines) + "\n" + verdict_paragraphs(starts))
    return "\n".join(blocks)


def _pair(scores: dict[str, float]) -> str:
    return f"{100 * scores['top1']:.2f} | {100 * scores['top5']:.2f}"
