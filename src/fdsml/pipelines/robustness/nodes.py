"""Nodes of the ``robustness`` pipeline: parse parameters, call ``fdsml.evaluation.corruptions`` / ``.classification``.

The corrupted test set is a catalog dataset (array shards): generated once from the clean
test split and reused while its fingerprint matches. When the released CIFAR-10-C / ImageNet-C
files are at ``released_root`` they are read in place instead, and the stored set only says so.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from fdsml.config import ConfigError, digest, parse, require_positive
from fdsml.data import ImageRecords, ImageTransform
from fdsml.data.classification_datasets import read_classification_dataset
from fdsml.evaluation.classification import robustness_errors
from fdsml.evaluation.corruptions import (
    CORRUPTION_GROUPS,
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
from fdsml.training.classification import (
    ClassificationConfig,
    DatasetSettings,
    parse_classification_params,
)
from fdsml.training.distributed import resolve_device

logger = logging.getLogger(__name__)

_READ_RELEASED = {"cifar10_c": lambda root, names: read_cifar10_c(root), "imagenet_c": read_imagenet_c}


@dataclass(frozen=True)
class RobustnessConfig:
    """``params:robustness``."""

    dataset: str = "digits"
    benchmark: Literal["cifar10_c", "imagenet_c"] = "cifar10_c"
    released_root: str | None = None
    image_size: int | None = 32
    max_images: int | None = None
    severities: tuple[int, ...] = SEVERITIES
    seed: int = 0
    batch_size: int = 256
    device: Literal["auto", "cpu", "cuda"] = "auto"
    example_index: int = 0

    def __post_init__(self):
        for key in ("image_size", "max_images"):
            if getattr(self, key) is not None:
                require_positive(key, getattr(self, key))
        require_positive("batch_size", self.batch_size)
        if not self.severities or not set(self.severities) <= set(SEVERITIES):
            raise ConfigError(f"severities: choose among {list(SEVERITIES)}, got {list(self.severities)}")
        if self.example_index < 0:
            raise ConfigError(f"example_index: must be >= 0, got {self.example_index}")


def parse_robustness_params(params: dict[str, Any]) -> RobustnessConfig:
    """Validate ``params:robustness``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(RobustnessConfig, params, "robustness")


def _dataset_settings(config: RobustnessConfig, classification: ClassificationConfig) -> DatasetSettings:
    for dataset in classification.datasets:
        if dataset.name == config.dataset:
            return dataset
    names = ", ".join(d.name for d in classification.datasets)
    raise ConfigError(f"robustness.dataset: {config.dataset!r} is not among classification.datasets ({names})")


def _released_root(config: RobustnessConfig) -> Path | None:
    if config.released_root is None:
        return None
    root = Path(config.released_root).expanduser()
    if root.is_dir():
        return root
    logger.warning("%s not found: generating %s from the clean test set instead", root, config.benchmark)
    return None


def _fingerprint(config: RobustnessConfig, dataset: DatasetSettings, split_seed: int) -> str:
    """What the generated set depends on: the clean images, the corruptions, their seeds, the package's version."""
    try:
        package = version("imagecorruptions-imaug")
    except PackageNotFoundError:
        package = "unknown"
    definition = {
        "dataset": asdict(dataset),
        "split_seed": split_seed,
        "package": package,
        **{k: v for k, v in asdict(config).items() if k in ("benchmark", "image_size", "max_images", "severities", "seed")},
    }
    return digest(definition)


def prepare_corrupted_test_set(classification_params: dict, robustness_params: dict, stored: dict | None) -> dict[str, Any]:
    """The corrupted test set (``corrupted_test_set``): every corruption x severity of the clean test split.

    Reuses ``stored`` (the previous run's set, None when absent) when its fingerprint matches;
    refers to the released files when they are at ``robustness.released_root``.
    """
    config = parse_robustness_params(robustness_params)
    classification = parse_classification_params(classification_params)
    dataset = _dataset_settings(config, classification)
    released = _released_root(config)
    if released is not None:
        return {"shards": [], "source": "released", "root": str(released), "benchmark": config.benchmark, "dataset": dataset.name}
    fingerprint = _fingerprint(config, dataset, classification.train.seed)
    if stored is not None and stored.get("source") == "generated" and stored.get("fingerprint") == fingerprint:
        logger.info("The corrupted test set is up to date (fingerprint %s): reusing it", fingerprint[:12])
        return {key: value for key, value in stored.items() if key not in ("folder", "count")}
    splits = read_classification_dataset(dataset.name, dataset.root, seed=classification.train.seed)
    clean = clean_test_images(splits.test, config.image_size, max_images=config.max_images, seed=config.seed)
    corruptions = benchmark_corruptions(config.benchmark)
    logger.info("Corrupting %d test images: %d corruptions x %d severities", len(clean), len(corruptions), len(config.severities))
    return {
        "shards": generated_shards(clean, corruptions, config.seed, config.severities),
        "keys": shard_keys(corruptions, config.severities),
        "labels": clean.labels.tolist(),
        "source": "generated",
        "benchmark": config.benchmark,
        "dataset": dataset.name,
        "fingerprint": fingerprint,
    }


def _load_sets(stored: dict, class_names=None) -> tuple[ImageRecords | None, CorruptedSet]:
    """(clean records or None, corrupted set) from the stored set: its shards, or the released files it names."""
    if stored["source"] == "released":
        return None, _READ_RELEASED[stored["benchmark"]](stored["root"], class_names)
    import numpy as np

    return stored_sets(stored["keys"], stored["shards"], np.asarray(stored["labels"]), stored["benchmark"])


def evaluate_robustness(
    fine_tuned_classifiers: dict, corrupted_test_set: dict, classification_params: dict, robustness_params: dict
) -> tuple[pd.DataFrame, dict, str]:
    """Every fine-tuned classifier of ``robustness.dataset`` on the clean and the corrupted test sets.

    Returns the error per model, corruption and severity (``robustness_errors``), the errors per
    group and their mean over all types with the clean error (``robustness_metrics``), and
    those as a Markdown table (``robustness_table``).
    """
    config = parse_robustness_params(robustness_params)
    classification = parse_classification_params(classification_params)
    dataset = _dataset_settings(config, classification)
    models = fine_tuned_classifiers["models"].values()
    payloads = {p["metadata"]["start"]: p for p in models if p["metadata"]["dataset"] == dataset.name}
    if not payloads:
        raise ValueError(
            f"no fine-tuned classifier for {dataset.name!r}: run kedro run --pipeline=classification "
            "with it among classification.datasets"
        )
    if corrupted_test_set["benchmark"] != config.benchmark or corrupted_test_set["dataset"] != dataset.name:
        raise ValueError(
            "the stored corrupted test set belongs to another benchmark or dataset: rerun prepare_corrupted_test_set_node"
        )
    clean, corrupted = None, None
    if corrupted_test_set["source"] == "released":
        splits = read_classification_dataset(dataset.name, dataset.root, seed=classification.train.seed)
        clean, (_, corrupted) = splits.test, _load_sets(corrupted_test_set, splits.class_names or None)
    else:
        clean, corrupted = _load_sets(corrupted_test_set)
    device = resolve_device(config.device)
    errors, clean_errors = {}, {}
    for start, payload in payloads.items():
        model = model_from_payload(payload)
        # corrupted images are already at their test view: resize to the model's input, no further crop
        transform = ImageTransform(payload["metadata"]["image_size"], crop_fraction=1.0)
        score = dict(batch_size=config.batch_size, device=device)
        clean_errors[start] = robustness_errors(model, {("clean", 0): clean}, transform, **score)[("clean", 0)]
        errors[start] = robustness_errors(model, corrupted.sets, transform, **score)
        logger.info("%s: clean error %.4f", start, clean_errors[start])
    table = error_table(errors)
    groups = group_errors(table, config.benchmark).loc[list(payloads)]
    per_type = table.groupby(["model", "corruption"])["error"].mean()
    metrics = {
        "benchmark": config.benchmark,
        "source": corrupted_test_set["source"],
        "dataset": dataset.name,
        "images": len(clean),
        "groups": {group: list(names) for group, names in CORRUPTION_GROUPS[config.benchmark].items()},
        "results": {
            start: {
                "clean_error": clean_errors[start],
                **{group: float(groups.loc[start, group]) for group in groups.columns},
                "per_corruption": {c: float(per_type[(start, c)]) for c in corrupted.corruptions},
            }
            for start in payloads
        },
    }
    return table, metrics, _markdown(groups, clean_errors)


def _markdown(groups: pd.DataFrame, clean_errors: dict[str, float]) -> str:
    """Rows: starting points; columns: clean error, each group's error, the mean over all types (%)."""
    columns = ["clean", *groups.columns]
    lines = ["| starting point | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for start in groups.index:
        values = [clean_errors[start], *groups.loc[start]]
        lines.append(f"| {start} | " + " | ".join(f"{100 * v:.2f}" for v in values) + " |")
    return "\n".join(lines) + "\n"


def plot_corruption_examples(corrupted_test_set: dict, robustness_params: dict):
    """One test image under every corruption and severity (``corruption_examples``)."""
    config = parse_robustness_params(robustness_params)
    clean, corrupted = _load_sets(corrupted_test_set)
    index = min(config.example_index, len(next(iter(corrupted.sets.values()))) - 1)
    clean_image = None if clean is None else clean.images[index]
    return example_figure(clean_image, corrupted, index)
