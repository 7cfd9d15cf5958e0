"""The precision each part of a training step computes in: one rule for every device, declared by the objective.

A step has three parts: the **trunk** (the model's input normalisation and backbone), the **head** (the
embedding or classifier head on the trunk's pooled features) and the **loss** (with normalisation,
distances, mining and proxies: :mod:`fdsml.losses.precision`), which is float32 always. ``train.amp``
says "bf16 where the device computes it natively": CUDA, and a CPU with native bfloat16 arithmetic
(AVX512-BF16 or AMX), where a ResNet-18 step runs about 1.5x faster (docs/cpu.md); a CPU without it
emulates bf16 and would run slower than float32, so it trains in float32. The CPU's own flags
(``/proc/cpuinfo``) decide; torch's check that its oneDNN kernels take bf16 is the complement.
``amp: false`` forces float32 anywhere.

Which parts take bf16 where the device has it is the objective's declaration, ``bf16_parts``, the same
on the CPU and CUDA: the measurement that set each one is in docs/cpu.md (precision parity). An objective
that declares nothing takes bf16 in the trunk and the head. ``train.bf16_parts`` overrides the
declaration (a study's arm: the precision parity study measures each choice).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from fdsml.config import ConfigError

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPUINFO = Path("/proc/cpuinfo")
PARTS = ("trunk", "head")
"""The parts that may compute in bf16, outermost first: a head in bf16 needs a trunk in bf16."""
DEFAULT_BF16_PARTS = PARTS
"""What an objective that declares no ``bf16_parts`` takes: bf16 in the trunk and the head."""


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The feature flags of ``/proc/cpuinfo``'s text (its first ``flags`` line; every core lists the same)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX) and torch's oneDNN kernels use it.

    Where ``/proc/cpuinfo`` is absent (not Linux) the answer is no: float32, the safe side.
    """
    try:
        flags = cpu_flags(CPUINFO.read_text())
    except OSError:
        return False
    return bool(flags & NATIVE_BF16_FLAGS) and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()


def device_has_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 natively: CUDA, or a CPU with native bf16 (:func:`cpu_has_native_bf16`)."""
    return device.type == "cuda" or (device.type == "cpu" and cpu_has_native_bf16())


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


def precision(loop, device: torch.device, objective: object = None) -> Precision:
    """The precision a run of ``objective`` computes in under ``loop`` (its ``amp`` and ``bf16_parts``) on ``device``:
    bf16 in the parts ``loop.bf16_parts`` names (null: the objective's ``bf16_parts``) where ``amp`` is on and the
    device computes bf16 natively; float32 in every other part."""
    declared = loop.bf16_parts if loop.bf16_parts is not None else getattr(objective, "bf16_parts", DEFAULT_BF16_PARTS)
    in_bf16 = check_bf16_parts(declared) if loop.amp and device_has_bf16(device) else ()
    return Precision(*(torch.bfloat16 if part in in_bf16 else torch.float32 for part in PARTS))
