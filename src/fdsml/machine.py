"""What machine a run computed on, in words: a study's units record it, since a unit's time and precision follow it.

Units reused across stops may come from different machines (a CPU with native bf16 trains in it, one without in
float32), so a table drawn from several should say so. The GPU's name where CUDA is visible, else the CPU's model.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

CPUINFO = Path("/proc/cpuinfo")


def cpuinfo_field(cpuinfo: str, key: str) -> str:
    """The value of ``/proc/cpuinfo``'s first ``key`` line (every core lists the same); empty where it has none."""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == key:
            return value.strip()
    return ""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what :func:`platform.processor` says where that file is absent."""
    try:
        found = cpuinfo_field(CPUINFO.read_text(), "model name")
    except OSError:
        found = ""
    return found or platform.processor() or "unknown CPU"


def machine_name() -> str:
    """The device a run trains on: the first visible GPU's name, else the CPU's model with its core count."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"{cpu_model()}, {os.cpu_count() or 1} cores"
