"""The optimiser's parameter groups and kind, by what a model and a configuration hold."""

from types import SimpleNamespace

import pytest
import torch

from fdsml.training.loop_config import OptimizerConfig
from fdsml.training.objectives import CrossEntropyObjective
from fdsml.training.optimizer import build_optimizer, build_scheduler, exempt_from_decay
from fdsml.training.schedules import build_schedule


@pytest.mark.parametrize(
    ("name", "shape", "exempt"),
    [
        ("backbone.pos_embed", (1, 5, 4), True),
        ("backbone.cls_token", (1, 1, 4), True),
        ("backbone.dist_token", (1, 1, 4), True),
        ("backbone.reg_token", (1, 4, 4), True),
        ("backbone.blocks.0.norm1.weight", (4,), True),
        ("head.bias", (4,), True),
        ("backbone.scale", (), True),
        ("backbone.blocks.0.attn.qkv.weight", (12, 4), False),
        ("backbone.pos_embed_proj.weight", (4, 4), False),  # a name that only begins like one
    ],
)
def test_norms_biases_scalars_position_embeddings_and_tokens_are_exempt_from_decay(name, shape, exempt):
    assert exempt_from_decay(name, torch.nn.Parameter(torch.zeros(shape))) is exempt


def _model(with_trunk: bool = True) -> torch.nn.Module:
    model = torch.nn.Module()
    if with_trunk:
        model.backbone = torch.nn.Linear(3, 3)
    model.head, model.frozen = torch.nn.Linear(3, 2), torch.nn.Linear(2, 2)
    model.frozen.requires_grad_(False)
    return model


def test_sgd_takes_the_configured_momentum_and_rate_and_leaves_frozen_parameters_out():
    model = _model()
    optimizer = build_optimizer(model, CrossEntropyObjective(), OptimizerConfig(name="sgd", momentum=0.7, weight_decay=0.01), 0.25)
    assert type(optimizer) is torch.optim.SGD
    assert [(g["lr"], g["momentum"], g["weight_decay"], g["trunk"]) for g in optimizer.param_groups] == [(0.25, 0.7, 0.01, True), (0.25, 0.7, 0.01, False)]
    members = [{id(p) for p in group["params"]} for group in optimizer.param_groups]
    assert members == [{id(p) for p in model.backbone.parameters()}, {id(p) for p in model.head.parameters()}]


def test_adamw_at_the_rate_and_a_model_without_a_trunk_has_an_empty_trunk_group():
    model = _model(with_trunk=False)
    optimizer = build_optimizer(model, CrossEntropyObjective(), OptimizerConfig(name="adamw", weight_decay=0.05), 1e-3)
    assert type(optimizer) is torch.optim.AdamW
    groups = [(g["trunk"], g["lr"], g["weight_decay"], len(g["params"])) for g in optimizer.param_groups]
    assert groups == [(True, 1e-3, 0.05, 0), (False, 1e-3, 0.05, 1), (True, 1e-3, 0.0, 0), (False, 1e-3, 0.0, 1)]  # weight; bias


def test_the_scheduler_follows_the_configured_schedule_with_its_flat_fraction():
    model = _model()
    config = OptimizerConfig(schedule="constant_cosine", constant_fraction=0.6)
    optimizer = build_optimizer(model, CrossEntropyObjective(), config, 1.0)
    scheduler = build_scheduler(optimizer, config, SimpleNamespace(total_steps=10, warmup_steps=0), freeze_steps=0)
    seen = []
    for _ in range(10):
        seen.append(optimizer.param_groups[1]["lr"])
        optimizer.step()
        scheduler.step()
    multiplier = build_schedule("constant_cosine", 10, constant_fraction=0.6)
    assert seen == pytest.approx([multiplier(step) for step in range(10)]) and seen[5] == 1.0 and seen[7] < 1.0
