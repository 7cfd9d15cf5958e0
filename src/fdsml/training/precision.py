"""The precision each part of a training step computes in: one rule for every device, declared by the objective.

A step has three parts: the **trunk** (the model's input normalisation and backbone), the **head** (the
embedding or classifier head on the trunk's pooled features) and the **loss** (with normalisation,
distances, mining and proxies: :mod:`fdsml.losses.precision`), which is float32 always. ``train.amp``
says "bf16 where the device computes it natively" (:mod:`fdsml.native_bf16`: CUDA, and a CPU with
AVX512-BF16 or AMX, where a ResNet-18 step runs about 1.5x faster; a CPU without them trains in float32).
``amp: false`` forces float32 anywhere.

Which parts take bf16 where the device has it is the objective's declaration, ``bf16_parts``, the same
on the CPU and CUDA: the measurement that set each one is in docs/cpu.md (precision parity). An objective
that declares nothing takes bf16 in the trunk and the head. ``train.bf16_parts`` overrides the
declaration (a study's arm: the precision parity study measures each choice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fdsml.config import ConfigError
from fdsml.native_bf16 import device_has_bf16

PARTS = ("trunk", "head")
"""The parts that may compute in bf16, outermost first: a head in bf16 needs a trunk in bf16."""
DEFAULT_BF16_PARTS = PARTS
"""What an objective that declares no ``bf16_parts`` takes: bf16 in the trunk and the head."""


def check_bf16_parts(parts: Sequence[str], key: str = "bf16_parts") -> tuple[str, ...]:
    """``parts`` as a tuple in :data:`PARTS`'s order; a ConfigError naming ``key`` for an unknown part, or a head
    in bf16 on a float32 trunk."""
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise ConfigError(f"{key}: unknown part(s) {', '.join(map(repr, unknown))}; choose among {', '.join(PARTS)} (the loss is always float32)")
    if "head" in parts and "trunk" not in parts:
        raise ConfigError(f"{key}: a head in bf16 needs its trunk in bf16 (the head reads the trunk's features): give [trunk, head], [trunk] or []")
    return tuple(part for part in PARTS if part in parts)


@dataclass(frozen=True)
class Precision:
    """What a training step computes in: the trunk and the head (bf16 or float32); the loss is float32 always."""

    trunk: torch.dtype = torch.float32
    head: torch.dtype = torch.float32

    @property
    def autocast(self) -> bool:
        """Whether the step runs under bf16 autocast (its trunk computes in bf16)."""
        return self.trunk == torch.bfloat16

    @property
    def float32_head(self) -> bool:
        """Whether the head computes in float32 on the trunk's features cast to float32, autocast off."""
        return self.head == torch.float32

    def __str__(self) -> str:
        return f"trunk {_name(self.trunk)}, head {_name(self.head)}, loss float32"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def declared_parts(loop, objective: object = None) -> tuple[str, ...]:
    """The parts a run of ``objective`` under ``loop`` computes in bf16 on a device that has it natively (a GPU):
    ``loop.bf16_parts`` when set, else the objective's declaration; none with ``amp`` off."""
    declared = loop.bf16_parts if loop.bf16_parts is not None else getattr(objective, "bf16_parts", DEFAULT_BF16_PARTS)
    return check_bf16_parts(declared) if loop.amp else ()


def precision(loop, device: torch.device, objective: object = None) -> Precision:
    """The precision a run of ``objective`` computes in under ``loop`` (its ``amp`` and ``bf16_parts``) on ``device``:
    bf16 in the parts ``loop.bf16_parts`` names (null: the objective's ``bf16_parts``) where ``amp`` is on and the
    device computes bf16 natively; float32 in every other part."""
    in_bf16 = declared_parts(loop, objective) if device_has_bf16(device) else ()
    return Precision(*(torch.bfloat16 if part in in_bf16 else torch.float32 for part in PARTS))
