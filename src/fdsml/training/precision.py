"""The precision a training run computes its forward pass in, chosen by what the hardware does natively.

``train.amp`` means "bf16 autocast on the device when it pays": on CUDA always, on a CPU only when
it has native bfloat16 arithmetic (AVX512-BF16 or AMX), where a ResNet-18 step runs about 1.5x
faster (docs/cpu.md); a CPU without it emulates bf16 and would run slower than float32. The CPU's
own flags (``/proc/cpuinfo``) decide; torch's check that its oneDNN kernels take bf16 is the
complement, so a build without them stays in float32. ``amp: false`` forces float32 anywhere.
An objective whose loss orders distances finer than bf16 features resolve declares ``cpu_bf16 = False``
and trains in float32 on the CPU (PA-Triplet and the other distance-margin objectives: measured in
docs/cpu.md); on CUDA they keep the bf16 autocast they always had.
Losses, distances, the descriptor and the metrics stay float32 whatever this says
(:mod:`fdsml.losses.precision`, :mod:`fdsml.evaluation.embedding`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
CPUINFO = Path("/proc/cpuinfo")


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


def precision(amp: bool, device: torch.device, objective: object = None) -> torch.dtype:
    """The autocast precision a run of ``objective`` computes in: bf16 with ``amp`` on CUDA, or on a CPU with
    native bf16 unless the objective declines it (``cpu_bf16 = False``); float32 otherwise."""
    cpu_bf16 = device.type == "cpu" and cpu_has_native_bf16() and getattr(objective, "cpu_bf16", True)
    return torch.bfloat16 if amp and (device.type == "cuda" or cpu_bf16) else torch.float32
