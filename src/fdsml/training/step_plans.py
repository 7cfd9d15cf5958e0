"""The plans of a run's training steps from its merged parameters: what ``python -m fdsml.plan`` prints and a study's cost
prices. A dataset's training images are counted when its folder is readable, and taken from ``plan.dataset_sizes``
(the published split sizes, ``conf/base/parameters_plan.yml``) otherwise."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from fdsml.config import ConfigError
from fdsml.data.layout import DatasetLayoutError
from fdsml.training.training_plan import PublishedSizes, TrainingPlan, parse_plan_params

PIPELINES = ("pretrain", "retrieval", "classification")


def _images(kind: str, name: str, read: Callable[[], Any], sizes: PublishedSizes) -> tuple[int, str, Any]:
    """The dataset's training images, counted when readable, else its published size; where the count came from; and the
    splits read (None when only the published size is known)."""
    try:
        splits = read()
        return len(splits.train), "counted in the dataset's folder", splits
    except DatasetLayoutError:
        published = getattr(sizes, kind)
        if name not in published:
            raise ConfigError(
                f"plan.dataset_sizes.{kind}.{name}: no folder to count {name}'s training images and no published size; "
                "add it to conf/base/parameters_plan.yml"
            ) from None
        return published[name], "published split size (plan.dataset_sizes), no folder here", None


def plan_steps(parameters: dict[str, Any], pipelines: tuple[str, ...], world_size: int) -> list[TrainingPlan]:
    """The (unchecked) plans of the training steps of ``pipelines`` at ``world_size``."""
    sizes = parse_plan_params(parameters.get("plan", {})).dataset_sizes
    plans = []
    if "pretrain" in pipelines:
        from fdsml.training.pretrain import parse_pretrain_params, plan_pretrain, pretraining_rows

        images, note = pretraining_rows(parameters["fractals"])
        plan = plan_pretrain(parse_pretrain_params(parameters["pretrain"]), images, world_size)
        plans.append(dataclasses.replace(plan, notes=(note,)))
    if "retrieval" in pipelines:
        from fdsml.training.retrieval import load_splits, parse_retrieval_params, plan_retrieval
        from fdsml.training.retrieval_comparison import recipe_notes

        config = parse_retrieval_params(parameters["retrieval"])
        images, source, splits = _images("retrieval", config.data.dataset, lambda: load_splits(config), sizes)
        notes = (f"images: {source}", *recipe_notes(config, splits))
        plans.append(dataclasses.replace(plan_retrieval(config, images, world_size), notes=notes))
    if "classification" in pipelines:
        from fdsml.data.classification_datasets import read_classification_dataset
        from fdsml.training.classification import parse_classification_params, plan_classification
        from fdsml.training.classification_comparison import recipe_notes as classification_notes

        config = parse_classification_params(parameters["classification"])
        for dataset in config.datasets:
            read = lambda d=dataset: read_classification_dataset(d.name, d.root, seed=config.train.seed)  # noqa: E731
            images, source, splits = _images("classification", dataset.name, read, sizes)
            plan = plan_classification(config, dataset.name, images, world_size)
            plans.append(dataclasses.replace(plan, notes=(f"images: {source}", *classification_notes(config, splits))))
    return plans
