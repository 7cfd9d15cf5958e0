"""What a study file costs on GPUs before it runs: every unit's training steps planned as its run will plan them, priced at
a throughput per GPU (``params:plan.gpu_throughput``), for one GPU and for several running units side by side.

A unit trains on one device (``study.jobs`` workers, ``study.devices`` pins each to a GPU): its pre-training, counted
once for all the units that share it (they differ only downstream, e.g. by the fine-tuning seed, and find it
trained), and each of its fine-tunings (``finetune`` and the named steps that run it, ``classify``). A step's GPU
seconds are its images seen (steps x global batch) over the throughput of its backbone at its image size, the
reference throughput scaled by the ratio of pixels. Evaluation, the raw-pixel and descriptor steps and the GPU check
are left out: minutes against hours. On several GPUs the study takes at least its GPU-hours over their number and at
least its longest unit (a pre-training and the fine-tuning after it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from fdsml.config import with_overlay
from fdsml.training.training_plan import GpuThroughput
from fdsml.tuning.study_file import StudyDefinition
from fdsml.tuning.study_runner import StudySettings, plan_units

TRAINING = {"pretrain": "pretrain", "pretrain_heldout": "pretrain", "finetune": "retrieval", "classify": "classification"}
"""The steps that train, and the pipeline whose plan each runs."""


@dataclass(frozen=True)
class UnitCost:
    """One unit's GPU seconds: its pre-training's (0 when an earlier unit trains the one it shares) and its fine-tunings'."""

    name: str
    pretrain_s: float
    finetune_s: float

    @property
    def seconds(self) -> float:
        return self.pretrain_s + self.finetune_s


def _step_seconds(pipeline: str, parameters: dict[str, Any], throughput: GpuThroughput) -> float:
    """GPU seconds of one training step: images seen over the backbone's throughput at the step's image size, in the
    precision its objective computes its trunk in on a GPU (:func:`fdsml.training.precision.declared_parts`)."""
    from fdsml.training.step_plans import plan_steps

    plan = plan_steps(parameters, (pipeline,), 1)[0]
    backbone, size = _backbone_and_size(pipeline, parameters)
    return plan.total_steps * plan.global_batch / throughput.rate(backbone, size, bf16="trunk" in _gpu_bf16_parts(pipeline, parameters))


def _gpu_bf16_parts(pipeline: str, parameters: dict[str, Any]) -> tuple[str, ...]:
    """The parts a training step computes in bf16 on a GPU: its objective's declaration under its ``train`` block."""
    from fdsml.training.precision import declared_parts

    if pipeline == "pretrain":
        from fdsml.training.pretrain import build_objective, parse_pretrain_params

        config = parse_pretrain_params(parameters["pretrain"])
        objective = build_objective(config, num_classes=2, embedding_dim=8)
    elif pipeline == "retrieval":
        from fdsml.training.retrieval import fine_tuning, parse_retrieval_params

        config = parse_retrieval_params(parameters["retrieval"])
        objective = fine_tuning(config, 2).objective(0)
    else:
        from fdsml.training.classification import fine_tuning, parse_classification_params

        config = parse_classification_params(parameters["classification"])
        objective = fine_tuning(config, "plan", 2).objective(0)
    return declared_parts(config.train, objective)


def _backbone_and_size(pipeline: str, parameters: dict[str, Any]) -> tuple[str, int]:
    """The trunk a step trains and the size of its images (the checkpoint's trunk for fine-tuning)."""
    model = parameters["pretrain"]["model"]
    if pipeline == "pretrain":
        return model["backbone"], model.get("img_size") or parameters["fractals"]["render"]["size"]
    size = parameters["retrieval"]["data"]["image_size"] if pipeline == "retrieval" else parameters["classification"]["image_size"]
    return model["backbone"], size


def unit_costs(study: StudyDefinition, settings: StudySettings, base: dict[str, Any], throughput: GpuThroughput) -> list[UnitCost]:
    """Every unit's GPU seconds, in the file's order; a pre-training shared by several units is priced once."""
    priced: set[str] = set()
    costs = []
    for name, unit in plan_units(study, settings, base).items():
        pretrain = finetune = 0.0
        for step in unit.steps:
            named = unit.named.get(step)
            kind = named.step if named else step
            if kind not in TRAINING:
                continue
            parameters = with_overlay(unit.parameters, named.overlay) if named else unit.parameters
            seconds = _step_seconds(TRAINING[kind], parameters, throughput)
            if TRAINING[kind] == "pretrain":
                key = _pretraining_key(parameters)
                pretrain += 0.0 if key in priced else seconds
                priced.add(key)
            else:
                finetune += seconds
        costs.append(UnitCost(name, pretrain, finetune))
    return costs


def _pretraining_key(parameters: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({k: parameters[k] for k in ("fractals", "pretrain")}, sort_keys=True, default=str).encode()).hexdigest()


def format_cost(costs: list[UnitCost], throughput: GpuThroughput, gpus: tuple[int, ...] = (1, 8), title: str = "") -> str:
    """The study's GPU-hours, its pre-training and fine-tuning shares, and the hours it takes on each of ``gpus``."""
    total = sum(cost.seconds for cost in costs)
    longest = max((cost.seconds for cost in costs), default=0.0)
    lines = [title] if title else []
    lines += [
        f"{len(costs)} units: {total / 3600:,.1f} GPU-hours "
        f"(pre-training {sum(c.pretrain_s for c in costs) / 3600:,.1f}, fine-tuning {sum(c.finetune_s for c in costs) / 3600:,.1f}); "
        f"the longest unit {longest / 3600:,.1f} h"
    ]
    for count in gpus:
        hours = max(total / count, longest) / 3600
        how = "one unit at a time" if count == 1 else f"study.jobs={count} study.devices=[{','.join(map(str, range(count)))}]"
        lines.append(f"  {count} GPU{'s' if count > 1 else ''}: at least {hours:,.1f} hours ({how})")
    lines.append(f"throughput: {', '.join(f'{b} {r:,.0f} img/s' for b, r in sorted(throughput.images_per_second.items()))} at {throughput.reference_size} px, "
                 f"scaled by pixels; {throughput.source or 'source not given'}")
    return "\n".join(lines) + "\n"
