"""Corruption robustness of fine-tuned classifiers (docs/method.md §5.5): the corrupted test set, its reuse, the metrics.

* **One test view.** Every image is seen as classification sees its test images
  (:func:`fdsml.data.image_records.test_view` at the classifier's ``image_size`` and
  ``crop_fraction``). A generated set corrupts the clean images' test views and scores them as
  they are; CIFAR-10-C's released arrays are corrupted raw images and go through the test
  view like the raw clean split; ImageNet-C's released images are already at its test view
  (:data:`RELEASED_VIEWS`), which the classifier must share. Clean and corrupted images are
  therefore seen at one zoom, and the clean error is exactly 1 - the classification top-1.
* **Reuse.** A generated set is reused while its :func:`fingerprint` matches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from fdsml import fingerprints
from fdsml.config import ConfigError, parse, require_non_negative, require_positive
from fdsml.errors import MissingInputError
from fdsml.run_events import StepReport, report_step
from fdsml.data import ImageRecords, ImageTransform
from fdsml.data.classification_datasets import read_classification_dataset
from fdsml.evaluation.classification import robustness_errors
from fdsml.evaluation.corruptions import (
    CORRUPTION_GROUPS,
    MIN_SIZE,
    SEVERITIES,
    CorruptedSet,
    benchmark_corruptions,
    clean_test_images,
    error_table,
    example_figure,
    generated_shards,
    group_errors,
    read_cifar10_c,
    read_imagenet_c,
    shard_keys,
    stored_sets,
)
from fdsml.models import model_from_payload
from fdsml.models.starting_points import recorded_start

logger = logging.getLogger(__name__)

_READ_RELEASED = {"cifar10_c": lambda root, names: read_cifar10_c(root), "imagenet_c": read_imagenet_c}
# (image_size, crop_fraction) of the test view the released images are already at; absent: raw images.
RELEASED_VIEWS = {"imagenet_c": (224, 0.875)}
_VIEW_KEYS = "classification.image_size and classification.augment.crop_fraction"


@dataclass(frozen=True)
class RobustnessConfig:
    """``params:robustness``; images are seen at the classifier's test view (``params:classification``)."""

    dataset: str = "digits"
    benchmark: Literal["cifar10_c", "imagenet_c"] = "cifar10_c"
    released_root: str | None = fingerprints.non_defining(default=None)  # released files are read in place, never stored
    max_images: int | None = None
    severities: tuple[int, ...] = SEVERITIES
    seed: int = 0
    # scoring and the picture: not part of the generated set's fingerprint
    batch_size: int = fingerprints.non_defining(default=256)
    workers: int = fingerprints.non_defining(default=0)  # DataLoader processes loading the images
    device: Literal["auto", "cpu", "cuda"] = fingerprints.non_defining(default="auto")
    example_index: int = fingerprints.non_defining(default=0)

    def __post_init__(self):
        if self.max_images is not None:
            require_positive("max_images", self.max_images)
        require_positive("batch_size", self.batch_size)
        require_non_negative("workers", self.workers)
        if not self.severities or not set(self.severities) <= set(SEVERITIES):
            raise ConfigError(f"severities: choose among {list(SEVERITIES)}, got {list(self.severities)}")
        if self.example_index < 0:
            raise ConfigError(f"example_index: must be >= 0, got {self.example_index}")


def parse_robustness_params(params: dict[str, Any]) -> RobustnessConfig:
    """Validate ``params:robustness``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(RobustnessConfig, params, "robustness")


def find_dataset(config: RobustnessConfig, datasets: Sequence[Any]) -> Any:
    """The settings (name, root) of ``robustness.dataset`` among the classification datasets."""
    for dataset in datasets:
        if dataset.name == config.dataset:
            return dataset
    names = ", ".join(d.name for d in datasets)
    raise ConfigError(f"robustness.dataset: {config.dataset!r} is not among classification.datasets ({names})")


def _released_root(config: RobustnessConfig) -> Path | None:
    if config.released_root is None:
        return None
    root = Path(config.released_root).expanduser()
    if root.is_dir():
        return root
    logger.warning("%s not found: generating %s from the clean test set instead", root, config.benchmark)
    return None


def _require_view(set_view: Sequence | None, model_view: tuple[int, float], what: str) -> None:
    """Images already at a test view can only be scored by a classifier of that very view."""
    if set_view is not None and tuple(set_view) != tuple(model_view):
        raise ValueError(
            f"{what} is at the test view (image_size, crop_fraction) = {tuple(set_view)}, the classifier's is "
            f"{tuple(model_view)}: set {_VIEW_KEYS} alike and rerun the classification and robustness pipelines"
        )


def fingerprint(config: RobustnessConfig, clean: ImageRecords) -> str:
    """The generated set's reuse fingerprint (:mod:`fdsml.fingerprints`): the clean test views by content, the
    corruption settings and seeds, the corruption code and the corruption package's version."""
    try:
        package = version("imagecorruptions-imaug")
    except PackageNotFoundError:
        package = "unknown"
    inputs = {"clean_images": fingerprints.content_digest({"images": clean.images, "labels": np.asarray(clean.labels)})}
    return fingerprints.fingerprint(
        {"robustness": config, "imagecorruptions": package}, code="fdsml.evaluation.corruptions", inputs=inputs
    )


def corrupted_test_set(
    config: RobustnessConfig, dataset: Any, split_seed: int, view: tuple[int, float], stored: dict | None
) -> dict[str, Any]:
    """The corrupted test set of ``dataset`` seen at ``view`` (the classifier's (image_size, crop_fraction)).

    Refers to the released files when they are at ``released_root``; otherwise reuses ``stored``
    (the previous set, None when absent) while its fingerprint matches, or generates every
    corruption x severity of the clean test images' views.
    """
    released = _released_root(config)
    common = {"benchmark": config.benchmark, "dataset": dataset.name}
    if released is not None:
        _require_view(RELEASED_VIEWS.get(config.benchmark), view, f"released {config.benchmark}")
        return {"shards": [], "source": "released", "root": str(released), "view": RELEASED_VIEWS.get(config.benchmark), **common}
    if view[0] < MIN_SIZE:
        raise ConfigError(
            f"classification.image_size: corruptions need images of at least {MIN_SIZE} px, got {view[0]}; "
            "raise it, or point robustness.released_root at released files"
        )
    splits = read_classification_dataset(dataset.name, dataset.root, seed=split_seed)
    clean = clean_test_images(splits.test, *view, max_images=config.max_images, seed=config.seed)
    key = fingerprint(config, clean)
    if stored is not None and stored.get("source") == "generated" and stored.get("fingerprint") == key:
        step = StepReport("corrupted test set", "corrupted_test_set", reused=True)
        report_step(logger, step, "The corrupted test set is up to date (fingerprint %s): reusing it", key[:12])
        return {k: v for k, v in stored.items() if k not in ("folder", "count")}
    corruptions = benchmark_corruptions(config.benchmark)
    step = StepReport("corrupted test set", "corrupted_test_set", reused=False)
    report_step(
        logger, step, "Corrupting %d test images: %d corruptions x %d severities", len(clean), len(corruptions), len(config.severities)
    )
    return {
        "shards": generated_shards(clean, corruptions, config.seed, config.severities),
        "keys": shard_keys(corruptions, config.severities),
        "labels": clean.labels.tolist(),
        "source": "generated",
        "view": list(view),
        "fingerprint": key,
        **common,
    }


def load_sets(stored: dict, class_names: Sequence[str] | None = None) -> tuple[ImageRecords | None, CorruptedSet]:
    """(clean records or None, corrupted set) from the stored set: its shards, or the released files it names."""
    if stored["source"] == "released":
        return None, _READ_RELEASED[stored["benchmark"]](stored["root"], class_names)
    return stored_sets(stored["keys"], stored["shards"], np.asarray(stored["labels"]), stored["benchmark"])


def _clean_and_corrupted(stored: dict, dataset: Any, split_seed: int) -> tuple[ImageRecords, CorruptedSet]:
    """The clean test images (released sets: the raw test split) and the corrupted set."""
    if stored["source"] == "generated":
        return load_sets(stored)
    splits = read_classification_dataset(dataset.name, dataset.root, seed=split_seed)
    return splits.test, load_sets(stored, splits.class_names or None)[1]


def _transforms(stored: dict, view: tuple[int, float]) -> tuple[ImageTransform, ImageTransform]:
    """(clean, corrupted) transforms: the test view for raw images, scaling to [0, 1] only for images already at it."""
    size, crop_fraction = view
    as_they_are, through_view = ImageTransform(size, crop_fraction=1.0), ImageTransform(size, crop_fraction=crop_fraction)
    if stored["source"] == "generated":
        return as_they_are, as_they_are
    return through_view, (as_they_are if stored["view"] is not None else through_view)


def evaluate_robustness(
    models: Iterable[dict],
    stored: dict,
    config: RobustnessConfig,
    dataset: Any,
    split_seed: int,
    device: str | torch.device = "cpu",
) -> tuple[pd.DataFrame, dict, str]:
    """Each classifier of ``models`` (model payloads) fine-tuned on ``dataset``, on the clean and the corrupted test sets.

    Returns the error per model, corruption and severity, the metrics (per group and over all
    types, with the clean error) and those as a Markdown table.
    """
    payloads = {p["metadata"]["start"]: p for p in models if p["metadata"]["dataset"] == dataset.name}
    if not payloads:
        raise MissingInputError(
            f"no fine-tuned classifier for {dataset.name!r}: run `kedro run --pipelines=classification` "
            "with it among classification.datasets"
        )
    if stored["benchmark"] != config.benchmark or stored["dataset"] != dataset.name:
        raise MissingInputError(
            "the stored corrupted test set belongs to another benchmark or dataset: "
            "run `kedro run --pipelines=robustness` to make it again"
        )
    clean, corrupted = _clean_and_corrupted(stored, dataset, split_seed)
    errors, clean_errors = {}, {}
    for start, payload in payloads.items():
        view = (payload["metadata"]["image_size"], payload["metadata"]["crop_fraction"])
        _require_view(stored["view"], view, "the corrupted test set")
        clean_transform, corrupted_transform = _transforms(stored, view)
        model, score = model_from_payload(payload), dict(batch_size=config.batch_size, device=device, workers=config.workers)
        clean_errors[start] = robustness_errors(model, {("clean", 0): clean}, clean_transform, **score)[("clean", 0)]
        errors[start] = robustness_errors(model, corrupted.sets, corrupted_transform, **score)
        logger.info("%s: clean error %.4f", start, clean_errors[start])
    table = error_table(errors)
    groups = group_errors(table, config.benchmark).loc[list(payloads)]
    metrics = _metrics(table, groups, clean_errors, corrupted, config, stored, len(clean))
    for start, payload in payloads.items():  # which trunk each row's classifier began from
        metrics["results"][start] |= recorded_start(payload)
    return table, metrics, _markdown(groups, clean_errors)


def _metrics(
    table: pd.DataFrame,
    groups: pd.DataFrame,
    clean_errors: dict[str, float],
    corrupted: CorruptedSet,
    config: RobustnessConfig,
    stored: dict,
    images: int,
) -> dict[str, Any]:
    per_type = table.groupby(["model", "corruption"])["error"].mean()
    return {
        "benchmark": config.benchmark,
        "source": stored["source"],
        "dataset": stored["dataset"],
        "images": images,
        "groups": {group: list(names) for group, names in CORRUPTION_GROUPS[config.benchmark].items()},
        "results": {
            start: {
                "clean_error": clean_errors[start],
                **{group: float(groups.loc[start, group]) for group in groups.columns},
                "per_corruption": {c: float(per_type[(start, c)]) for c in corrupted.corruptions},
            }
            for start in groups.index
        },
    }


def _markdown(groups: pd.DataFrame, clean_errors: dict[str, float]) -> str:
    """Rows: starting points; columns: clean error, each group's error, the mean over all types (%)."""
    columns = ["clean", *groups.columns]
    lines = ["| starting point | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for start in groups.index:
        values = [clean_errors[start], *groups.loc[start]]
        lines.append(f"| {start} | " + " | ".join(f"{100 * v:.2f}" for v in values) + " |")
    return "\n".join(lines) + "\n"


def corruption_examples(stored: dict, config: RobustnessConfig):
    """One test image (``example_index``, clipped to the set) under every corruption and severity."""
    clean, corrupted = load_sets(stored)
    index = min(config.example_index, len(next(iter(corrupted.sets.values()))) - 1)
    return example_figure(None if clean is None else clean.images[index], corrupted, index)
