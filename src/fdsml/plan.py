"""``python -m fdsml.plan``: the training plan of every training step, for an environment and a world size.

Parameters load the way ``kedro run`` loads them (``conf/base`` + the environment, ``--params``
on top), so the plan printed is the plan the run will check at start. A dataset's training
images are counted when its folder is readable, and taken from ``plan.dataset_sizes`` (the
published split sizes, ``conf/base/parameters_plan.yml``) otherwise. Exit status 1 when a plan
cannot train, 2 when the parameters are invalid (an unknown key at any depth included). `kedro check`
checks the rest before work: folders, images, Recall@K, starting checkpoints.

    python -m fdsml.plan --env paper --world-size 8 --pipelines pretrain
    python -m fdsml.plan --study paper_ordering              # a study file's GPU-hours on one GPU and on eight
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kedro.config import OmegaConfigLoader
from omegaconf import OmegaConf

from fdsml import settings
from fdsml.config import require_each_key_once
from fdsml.errors import UserFixableError
from fdsml.training.step_plans import PIPELINES, plan_steps
from fdsml.training.training_plan import format_plans


def load_parameters(env: str | None, params: list[str], conf_source: str | Path = "conf") -> dict[str, Any]:
    """Every parameter of ``conf/base`` + ``env`` with ``params`` (``key.path=value``) on top, as ``kedro run`` merges them."""
    require_each_key_once(params)
    runtime = OmegaConf.to_container(OmegaConf.from_dotlist(params)) if params else None
    loader = OmegaConfigLoader(str(conf_source), env=env, runtime_params=runtime, **settings.CONFIG_LOADER_ARGS)
    return loader["parameters"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fdsml.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default=None, help="Kedro environment on top of base (e.g. paper); default: local")
    parser.add_argument("--world-size", type=int, default=1, help="number of replicas (GPUs) the run will use")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help=f"comma-separated, from {', '.join(PIPELINES)}")
    parser.add_argument("--params", default="", help="overrides as kedro run takes them: key.path=value,other.key=value")
    parser.add_argument("--conf-source", default="conf", help="the project's conf/ folder")
    parser.add_argument("--study", help="a study file of conf/studies: its GPU-hours (plan.gpu_throughput) instead of one run's plan")
    parser.add_argument("--scale", help="with --study: one of the file's scales")
    parser.add_argument("--gpus", default="1,8", help="with --study: the GPU counts to give the hours for")
    args = parser.parse_args(argv)
    if args.study:
        return _study_cost(args)
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


def _study_cost(args: argparse.Namespace) -> int:
    """Print the study's GPU-hours; exit status 2 when its file or parameters are invalid."""
    from fdsml.config import env_parameters
    from fdsml.training.training_plan import parse_plan_params
    from fdsml.tuning.study_cost import format_cost, unit_costs
    from fdsml.tuning.study_file import read_study
    from fdsml.tuning.study_runner import parse_study_settings, study_path

    try:
        settings = parse_study_settings({"name": args.study, "scale": args.scale, "conf_source": args.conf_source})
        study = read_study(study_path(settings))
        base = env_parameters(args.conf_source, study.env)
        throughput = parse_plan_params(base.get("plan", {})).gpu_throughput
        costs = unit_costs(study, settings, base, throughput)
        gpus = tuple(int(count) for count in args.gpus.split(",") if count.strip())
    except (UserFixableError, ValueError) as error:
        print(f"invalid study: {error}", file=sys.stderr)
        return 2
    scale = f", scale {args.scale}" if args.scale else ""
    print(format_cost(costs, throughput, gpus, f"Study {args.study}{scale} (environment {study.env}), each unit on one GPU"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
