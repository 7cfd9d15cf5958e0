"""Learning-rate schedules as multipliers of the base rate, and the linear batch-size scaling rule."""

from __future__ import annotations

import math
from collections.abc import Callable

Schedule = Callable[[int], float]
SCHEDULES: dict[str, Callable[..., Schedule]] = {}


def register_schedule(name: str):
    """Register a factory ``(total_steps, *, constant_fraction, warmup_steps) -> multiplier(step)``."""

    def register(factory):
        SCHEDULES[name] = factory
        return factory

    return register


def scaled_learning_rate(base_lr: float, batch_size: int, reference_batch: int = 256) -> float:
    """lr = base_lr * effective batch / reference batch (docs/method.md §4.3)."""
    return base_lr * batch_size / reference_batch


def _cosine(progress: float) -> float:
    return 0.5 * (1.0 + math.cos(math.pi * min(max(progress, 0.0), 1.0)))


@register_schedule("constant")
def constant(total_steps: int, **_) -> Schedule:
    return lambda step: 1.0


@register_schedule("constant_cosine")
def constant_then_cosine(total_steps: int, *, constant_fraction: float = 0.4, **_) -> Schedule:
    """ResNet recipe: the base rate for the first ``constant_fraction`` of training, then cosine to 0."""
    flat = int(round(constant_fraction * total_steps))

    def multiplier(step: int) -> float:
        if step < flat:
            return 1.0
        return _cosine((step - flat) / max(total_steps - flat, 1))

    return multiplier


@register_schedule("warmup_cosine")
def warmup_then_cosine(total_steps: int, *, warmup_steps: int = 0, **_) -> Schedule:
    """ViT recipe: linear warm-up over ``warmup_steps`` steps, then cosine to 0."""

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        return _cosine((step - warmup_steps) / max(total_steps - warmup_steps, 1))

    return multiplier


def build_schedule(name: str, total_steps: int, **options) -> Schedule:
    """The registered schedule ``name``; a clear error for an unknown one."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    return SCHEDULES[name](total_steps, **options)
