"""Whether this machine has an NVIDIA GPU, asked of the operating system rather than of torch.

The CUDA build of torch installs on machines without any GPU, so torch seeing no device says
nothing about the machine; the driver's version file and its device nodes do. ``device: auto``
uses them to tell a machine without a GPU (train on the CPU) from one whose GPU torch cannot use
(stop: days on the CPU of a GPU node are a mistake, not a fallback).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

DRIVER_VERSION = Path("/proc/driver/nvidia/version")
DEVICE_NODES = Path("/dev")
NODE_PATTERNS = ("nvidia[0-9]*", "nvidiactl")


def nvidia_gpu_evidence(driver: Path = DRIVER_VERSION, nodes: Path = DEVICE_NODES) -> str | None:
    """What shows an NVIDIA GPU here: the driver's version line, or its device nodes; None for neither."""
    if driver.is_file():
        lines = driver.read_text(errors="replace").strip().splitlines()
        return f"{driver}: {lines[0].strip() if lines else 'present'}"
    found = sorted(str(node) for pattern in NODE_PATTERNS for node in nodes.glob(pattern))
    return f"device node(s) {', '.join(found)}" if found else None


def cuda_unusable_reason() -> str:
    """Why torch cannot use CUDA, in torch's own words where it has them (and ``CUDA_VISIBLE_DEVICES``, which can hide every GPU)."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = "" if hidden is None else f" with CUDA_VISIBLE_DEVICES={hidden!r}"
    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is a CPU-only build"
    try:
        torch.cuda.init()
    except Exception as error:  # torch says why: no driver, a driver too old for its CUDA, hidden devices
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}){visible}: {str(error).splitlines()[0]}"
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}){visible} sees {torch.cuda.device_count()} device(s)"
