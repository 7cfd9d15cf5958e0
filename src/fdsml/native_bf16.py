"""Whether a device computes bfloat16 natively: CUDA, and a CPU whose own flags say so.

A CPU with AVX512-BF16 or AMX computes bf16 natively, where a ResNet-18 step runs about 1.5x faster than in
float32 (docs/cpu.md); one without emulates it and would run slower, so it stays in float32. The CPU's flags
(``/proc/cpuinfo``) decide; torch's check that its oneDNN kernels take bf16 is the complement. Training
(:mod:`fdsml.training.precision`) and evaluation (:mod:`fdsml.evaluation.embedding`) ask the same question here.
"""

from __future__ import annotations

import functools

import torch

from fdsml.machine import CPUINFO, cpuinfo_field

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The feature flags of ``/proc/cpuinfo``'s text (its first ``flags`` line; every core lists the same)."""
    return frozenset(cpuinfo_field(cpuinfo, "flags").split())


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
