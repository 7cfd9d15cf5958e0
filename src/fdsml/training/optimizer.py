"""The optimiser and its learning-rate schedule: parameter groups (trunk, rest of the model, the
objective's own), weight-decay exemptions, and each group's multiplier of the planned rate."""

from __future__ import annotations

import torch
from torch import nn

from fdsml.training.loop_config import OptimizerConfig
from fdsml.training.training_plan import TrainingPlan
from fdsml.training.schedules import build_schedule


NO_DECAY_NAMES = ("pos_embed", "cls_token", "dist_token", "reg_token")


def exempt_from_decay(name: str, parameter: nn.Parameter) -> bool:
    """Norm weights, biases (every 0-d or 1-d parameter), position embeddings and class tokens."""
    return parameter.ndim <= 1 or name.rsplit(".", 1)[-1] in NO_DECAY_NAMES


def build_optimizer(model: nn.Module, objective: nn.Module, config: OptimizerConfig, learning_rate: float):
    """SGD (momentum) or AdamW: group 0 the trunk, group 1 the rest of the model, then the objective's groups.

    ``learning_rate`` is the plan's (already scaled by the global batch). An objective's group may
    carry ``lr_multiplier`` (e.g. proxies at 100x the model's rate). Each group says whether it is
    the trunk's (``trunk``), for the trunk's own schedule. AdamW (the ViT recipe) keeps norms,
    biases, position embeddings and class tokens out of weight decay, the DeiT / MoCo v3
    convention, in two more groups (trunk, rest) with ``weight_decay`` 0.
    """
    trunk = getattr(model, "backbone", None)
    trunk_ids = {id(p) for p in trunk.parameters()} if trunk is not None else set()
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    exempt = {id(p) for name, p in trainable if config.name == "adamw" and exempt_from_decay(name, p)}

    def members(in_trunk: bool, exempted: bool) -> list[nn.Parameter]:
        return [p for _, p in trainable if (id(p) in trunk_ids) == in_trunk and (id(p) in exempt) == exempted]

    groups = [{"params": members(in_trunk, False), "trunk": in_trunk} for in_trunk in (True, False)]
    for group in objective.param_groups():
        group = dict(group)
        group["lr"] = learning_rate * group.pop("lr_multiplier", 1.0)
        groups.append({**group, "trunk": False})
    if exempt:
        groups += [{"params": members(in_trunk, True), "trunk": in_trunk, "weight_decay": 0.0} for in_trunk in (True, False)]
    if config.name == "sgd":
        return torch.optim.SGD(groups, lr=learning_rate, momentum=config.momentum, weight_decay=config.weight_decay)
    return torch.optim.AdamW(groups, lr=learning_rate, weight_decay=config.weight_decay)


def frozen_trunk(multiplier, freeze_steps: int):
    """The trunk's multiplier: 0 for the first ``freeze_steps`` steps (head and proxies warm up alone)."""
    return lambda step: 0.0 if step < freeze_steps else multiplier(step)


def build_scheduler(optimizer: torch.optim.Optimizer, config: OptimizerConfig, plan: TrainingPlan, freeze_steps: int):
    """The schedule of ``plan``'s steps as a multiplier per group; the trunk's groups stay at 0 for ``freeze_steps`` steps."""
    multiplier = build_schedule(
        config.schedule,
        plan.total_steps,
        constant_fraction=config.constant_fraction,
        warmup_steps=plan.warmup_steps,
    )
    trunk_multiplier = frozen_trunk(multiplier, freeze_steps)
    multipliers = [trunk_multiplier if group["trunk"] else multiplier for group in optimizer.param_groups]
    return torch.optim.lr_scheduler.LambdaLR(optimizer, multipliers)
