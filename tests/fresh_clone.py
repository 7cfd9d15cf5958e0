"""A fresh clone of the repository (the files git knows, no data) and ``kedro run`` inside it, as a user types it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .support import ROOT, copy_tracked

BIN = Path(sys.executable).parent
ENV = os.environ | {
    "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    "KEDRO_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "DVC_NO_ANALYTICS": "1",
}


def fresh_clone(folder: Path) -> Path:
    """Every file git tracks (or would track) copied into ``folder``: data and local settings stay behind."""
    return copy_tracked(folder)


def start(command: str, folder: Path) -> subprocess.Popen:
    """Start ``command`` (a shell line) in ``folder``; its stdout and stderr come back together."""
    return subprocess.Popen(command, shell=True, cwd=folder, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    """Wait for a started command; its exit code and everything it printed."""
    output, _ = process.communicate(timeout=timeout)
    return process.returncode, output


def run(command: str, folder: Path, timeout: float = 600) -> tuple[int, str]:
    """Run ``command`` in ``folder``; the exit code and everything it printed."""
    return finish(start(command, folder), timeout)
