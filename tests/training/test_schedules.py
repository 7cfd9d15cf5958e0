"""The learning-rate schedules against docs/method.md §4.3, per parameter group, in a run's history and across a resume.

    constant_cosine:  1 for t < F = round(0.4 T), then 0.5 (1 + cos(pi (t - F) / (T - F)))
    warmup_cosine:    (t + 1) / W for t < W, then 0.5 (1 + cos(pi (t - W) / (T - W)))
    the trunk's multiplier: 0 for t < freeze_backbone_steps
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from fdsml.training.loop_config import OptimizerConfig
from fdsml.training.optimizer import build_optimizer, build_scheduler, frozen_trunk
from fdsml.training.pretrain import pretrain
from fdsml.training import schedules
from fdsml.training.schedules import build_schedule, scaled_learning_rate

from tests.support import TINY_SPEC
from .helpers import killed_after_checkpoint, tiny_config


def cosine(t: float, start: float, end: float) -> float:
    return 0.5 * (1 + math.cos(math.pi * (t - start) / (end - start)))


def test_constant_cosine_holds_the_base_rate_for_the_first_forty_percent_then_falls_to_zero():
    schedule = build_schedule("constant_cosine", 10, constant_fraction=0.4)  # F = 4
    expected = [1.0, 1.0, 1.0, 1.0, 1.0, cosine(5, 4, 10), 0.75, 0.5, 0.25, cosine(9, 4, 10)]
    assert [schedule(t) for t in range(10)] == pytest.approx(expected, abs=1e-12)
    assert schedule(7) == pytest.approx(0.5) and schedule(10) == pytest.approx(0.0, abs=1e-12)


def test_constant_cosine_rounds_the_flat_part():
    schedule = build_schedule("constant_cosine", 9, constant_fraction=0.5)  # F = round(4.5) = 4 (banker's), T - F = 5
    assert [schedule(t) for t in (3, 4, 5)] == pytest.approx([1.0, 1.0, cosine(5, 4, 9)])


def test_warmup_cosine_rises_from_one_over_w_to_one_then_falls_to_zero():
    schedule = build_schedule("warmup_cosine", 12, warmup_steps=4)
    assert [schedule(t) for t in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert [schedule(t) for t in (4, 8, 11, 12)] == pytest.approx([1.0, 0.5, cosine(11, 4, 12), 0.0], abs=1e-12)


def test_warmup_cosine_without_warmup_is_a_cosine_from_the_first_step():
    schedule = build_schedule("warmup_cosine", 8, warmup_steps=0)
    assert [schedule(t) for t in (0, 4, 8)] == pytest.approx([1.0, 0.5, 0.0], abs=1e-12)


def test_constant_is_one_everywhere_and_the_rate_scales_with_the_batch():
    assert {build_schedule("constant", 5)(t) for t in range(7)} == {1.0}
    assert scaled_learning_rate(0.1, 512) == pytest.approx(0.2) and scaled_learning_rate(0.1, 64, reference_batch=32) == pytest.approx(0.2)


def test_an_unknown_schedule_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError, match=r"^unknown schedule 'cosine'; choose one of constant, constant_cosine, warmup_cosine$"):
        build_schedule("cosine", 10)


def test_the_trunk_is_frozen_exactly_freeze_steps_steps():
    trunk = frozen_trunk(lambda step: 0.5, 3)
    assert [trunk(t) for t in range(5)] == [0.0, 0.0, 0.0, 0.5, 0.5]


def test_every_group_follows_the_schedule_and_the_trunk_waits_out_its_freeze():
    model = torch.nn.Module()
    model.backbone, model.head = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    objective = torch.nn.Module()
    objective.param_groups = lambda: [{"params": [torch.nn.Parameter(torch.zeros(2))], "lr_multiplier": 10.0}]
    config = OptimizerConfig(name="sgd", base_lr=0.4, schedule="warmup_cosine")
    plan = SimpleNamespace(total_steps=10, warmup_steps=2)  # all build_scheduler reads of a TrainingPlan
    optimizer = build_optimizer(model, objective, config, 0.4)
    scheduler = build_scheduler(optimizer, config, plan, freeze_steps=3)
    seen = []
    for _ in range(10):
        seen.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        scheduler.step()
    multiplier = build_schedule("warmup_cosine", 10, warmup_steps=2)
    for t, (trunk, rest, proxies) in enumerate(seen):
        assert rest == pytest.approx(0.4 * multiplier(t)) and proxies == pytest.approx(4.0 * multiplier(t))
        assert trunk == (0.0 if t < 3 else pytest.approx(0.4 * multiplier(t)))


DECAYING = {"name": "sgd", "base_lr": 2.0, "schedule": "constant_cosine", "constant_fraction": 0.4}


def test_a_short_run_logs_the_learning_rate_of_each_step_by_the_formula(tiny_table, tmp_path):
    config = tiny_config(tmp_path, optimizer=DECAYING, train={"max_steps": 5, "checkpoint_every": 100})
    _, history = pretrain(tiny_table, TINY_SPEC, config)
    base = scaled_learning_rate(2.0, 9)  # P x K = 3 x 3 images, reference batch 256
    expected = [base * m for m in (1.0, 1.0, cosine(2, 2, 5), cosine(3, 2, 5), cosine(4, 2, 5))]
    assert history["lr"].tolist() == pytest.approx(expected)


def test_a_run_killed_under_a_decaying_schedule_resumes_to_the_uninterrupted_weights_and_rates(tiny_table, tmp_path, monkeypatch):
    train = {"max_steps": 8, "checkpoint_every": 2}
    killed = tiny_config(tmp_path / "killed", optimizer=DECAYING, train=train)
    with killed_after_checkpoint(monkeypatch, 4), pytest.raises(KeyboardInterrupt):
        pretrain(tiny_table, TINY_SPEC, killed)
    resumed, resumed_history = pretrain(tiny_table, TINY_SPEC, killed)
    straight, straight_history = pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path / "straight", optimizer=DECAYING, train=train))
    assert resumed_history["step"].tolist() == list(range(1, 9))
    assert resumed_history["lr"].tolist() == straight_history["lr"].tolist()
    assert len(set(straight_history["lr"])) > 2  # the rate decays: a resume at the wrong point of the schedule shows
    for name, tensor in straight["state_dict"].items():
        torch.testing.assert_close(resumed["state_dict"][name], tensor, rtol=0, atol=0, msg=name)


def test_a_registered_schedule_is_built_by_its_name(monkeypatch):
    monkeypatch.setattr(schedules, "SCHEDULES", dict(schedules.SCHEDULES))  # the registry as it was, after the test
    halving = schedules.register_schedule("halving")(lambda total_steps, **_: lambda step: 0.5**step)
    assert schedules.SCHEDULES["halving"] is halving and build_schedule("halving", 10)(3) == 0.125


@pytest.mark.parametrize("name", ["constant_cosine", "warmup_cosine"])
def test_a_cosine_schedule_stays_at_zero_past_its_last_step(name):
    schedule = build_schedule(name, 10, constant_fraction=0.4, warmup_steps=2)
    assert schedule(10) == schedule(15) == schedule(25) == pytest.approx(0.0, abs=1e-12)
