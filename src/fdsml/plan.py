"""``python -m fdsml.plan``: the training plan of every training step, for an environment and a world size.

Parameters load the way ``kedro run`` loads them (``conf/base`` + the environment, ``--params``
on top), so the plan printed is the plan the run will check at start. A dataset's training
images are counted when its folder is readable, and taken from ``plan.dataset_sizes`` (the
published split sizes, ``conf/base/parameters_plan.yml``) otherwise. Exit status 1 when a plan
cannot train, 2 when the parameters are invalid (an unknown key at any depth included). `kedro check`
checks the rest before work: folders, images, Recall@K, starting checkpoints.

    python -m fdsml.plan --env paper --world-size 8 --pipelines pretrain
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kedro.config import OmegaConfigLoader
from omegaconf import OmegaConf

from fdsml import settings
from fdsml.config import ConfigError, require_each_key_once
from fdsml.data.layout import DatasetLayoutError
from fdsml.errors import UserFixableError
from fdsml.training.training_plan import PublishedSizes, TrainingPlan, format_plans, parse_plan_params

PIPELINES = ("pretrain", "retrieval", "classification")


def load_parameters(env: str | None, params: list[str], conf_source: str | Path = "conf") -> dict[str, Any]:
    """Every parameter of ``conf/base`` + ``env`` with ``params`` (``key.path=value``) on top, as ``kedro run`` merges them."""
    require_each_key_once(params)
    runtime = OmegaConf.to_container(OmegaConf.from_dotlist(params)) if params else None
    loader = OmegaConfigLoader(str(conf_source), env=env, runtime_params=runtime, **settings.CONFIG_LOADER_ARGS)
    return loader["parameters"]


def _images(kind: str, name: str, count: Callable[[], int], sizes: PublishedSizes) -> tuple[int, str]:
    """The dataset's training images, counted when readable, else its published size; and where it came from."""
    try:
        return count(), "counted in the dataset's folder"
    except DatasetLayoutError:
        published = getattr(sizes, kind)
        if name not in published:
            raise ConfigError(
                f"plan.dataset_sizes.{kind}.{name}: no folder to count {name}'s training images and no published size; "
                "add it to conf/base/parameters_plan.yml"
            ) from None
        return published[name], "published split size (plan.dataset_sizes), no folder here"


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

        config = parse_retrieval_params(parameters["retrieval"])
        images, source = _images("retrieval", config.data.dataset, lambda: len(load_splits(config).train), sizes)
        plans.append(dataclasses.replace(plan_retrieval(config, images, world_size), notes=(f"images: {source}",)))
    if "classification" in pipelines:
        from fdsml.data.classification_datasets import read_classification_dataset
        from fdsml.training.classification import parse_classification_params, plan_classification

        config = parse_classification_params(parameters["classification"])
        for dataset in config.datasets:
            count = lambda d=dataset: len(read_classification_dataset(d.name, d.root, seed=config.train.seed).train)  # noqa: E731
            images, source = _images("classification", dataset.name, count, sizes)
            plan = plan_classification(config, dataset.name, images, world_size)
            plans.append(dataclasses.replace(plan, notes=(f"images: {source}",)))
    return plans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fdsml.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default=None, help="Kedro environment on top of base (e.g. paper); default: local")
    parser.add_argument("--world-size", type=int, default=1, help="number of replicas (GPUs) the run will use")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help=f"comma-separated, from {', '.join(PIPELINES)}")
    parser.add_argument("--params", default="", help="overrides as kedro run takes them: key.path=value,other.key=value")
    parser.add_argument("--conf-source", default="conf", help="the project's conf/ folder")
    args = parser.parse_args(argv)
    pipelines = tuple(p.strip() for p in args.pipelines.split(",") if p.strip())
    unknown = sorted(set(pipelines) - set(PIPELINES))
    if unknown:
        parser.error(f"--pipelines: unknown {', '.join(unknown)}; choose from {', '.join(PIPELINES)}")
    from fdsml.pipelines.run_checks import check_run

    try:
        parameters = load_parameters(args.env, [p for p in args.params.split(",") if p.strip()], args.conf_source)
        check_run(parameters, reads=set())  # every key known, every section's values; no folder is read
        plans = plan_steps(parameters, pipelines, args.world_size)
    except UserFixableError as error:
        print(f"invalid parameters: {error}", file=sys.stderr)
        return 2
    print(format_plans(plans, f"Training plan, environment {args.env or 'base'}, {args.world_size} replica(s)"))
    return 1 if any(plan.problems() for plan in plans) else 0


if __name__ == "__main__":
    sys.exit(main())
