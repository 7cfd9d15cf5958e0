"""Training runs' fingerprints, and pre-training's run folders: one per run fingerprint under ``run_dir``.

Every training run (pre-training, retrieval, classification) is fingerprinted by one function,
:func:`run_fingerprint`, from what defines it (:class:`RunDefinition`). A run of one fingerprint
never overwrites another's: a changed setting starts its own folder beside the old one, and
going back to the old setting resumes (or reuses) the old run. ``kedro runs list`` shows them,
newest first; ``kedro runs remove`` removes old ones.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fdsml import fingerprints
from fdsml.config import ConfigError
from fdsml.distributed import DistContext
from fdsml.training.loop_config import LoopConfig
from fdsml.training.precision import precision

FOLDER_DIGITS = 16  # of the SHA-256 fingerprint: 64 bits name a run folder
CHECKPOINT = "last.pt"


def run_folder(run_dir: str | Path, fingerprint: str) -> Path:
    """The folder of the run with ``fingerprint`` under ``run_dir``."""
    if len(fingerprint) < FOLDER_DIGITS:
        raise ValueError(f"a run fingerprint has at least {FOLDER_DIGITS} hex digits, got {fingerprint!r}")
    return Path(run_dir) / fingerprint[:FOLDER_DIGITS]


def training_runtime(loop, device: torch.device, objective: object = None) -> dict:
    """What a training run's result depends on beyond its settings: the libraries' versions and the
    resolved device type and precision of ``objective`` (``device: auto`` resolves differently on another machine)."""
    return {"libraries": fingerprints.library_versions(), "device": device.type, "precision": str(precision(loop, device, objective))}


@dataclass(frozen=True)
class RunDefinition:
    """What defines one training run, as its fingerprint reads it.

    ``configuration``: the step's configuration under its name (``{"pretrain": config}``) with
    whatever else this run is made of (its start and seed, its dataset, the formula family);
    ``code``: the modules that compute it (their imports follow); ``inputs``: each input
    artefact's role and :func:`~fdsml.fingerprints.content_digest`, never a name or a path.
    """

    configuration: Mapping[str, Any]
    code: str | tuple[str, ...]
    inputs: Mapping[str, str]


def run_fingerprint(run: RunDefinition, loop: LoopConfig, context: DistContext, objective: object = None) -> str:
    """The reuse fingerprint (:mod:`fdsml.fingerprints`) of a training run: what defines it, the world size, and
    the runtime (:func:`training_runtime`) of ``loop`` training ``objective`` on ``context``'s device."""
    return fingerprints.fingerprint(
        run.configuration,
        code=run.code,
        inputs=run.inputs,
        world_size=context.world_size,
        runtime=training_runtime(loop, context.device, objective),
    )


@dataclass(frozen=True)
class RunFolder:
    """One run folder: its path, when its checkpoint was last written, and its size."""

    path: Path
    written: float  # seconds since the epoch; 0 when it holds no checkpoint
    size_bytes: int

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.written)) if self.written else "no checkpoint"
        return f"{self.path.name}  {when}  {self.size_bytes / 2**20:,.1f} MiB"


def list_runs(run_dir: str | Path) -> list[RunFolder]:
    """The run folders under ``run_dir``, most recently written first (none when it does not exist)."""
    root = Path(run_dir)
    if not root.is_dir():
        return []
    runs = []
    for folder in root.iterdir():
        if folder.is_dir() and len(folder.name) == FOLDER_DIGITS and all(c in "0123456789abcdef" for c in folder.name):
            checkpoint = folder / CHECKPOINT
            written = checkpoint.stat().st_mtime if checkpoint.exists() else 0.0
            size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
            runs.append(RunFolder(folder, written, size))
    return sorted(runs, key=lambda run: run.written, reverse=True)


def remove_runs(run_dir: str | Path, *, keep: int | None = None, names: tuple[str, ...] = ()) -> list[RunFolder]:
    """Remove the runs named ``names``, or all but the ``keep`` most recently written; returns the removed ones."""
    runs = list_runs(run_dir)
    if names:
        known = {run.path.name: run for run in runs}
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise ConfigError(f"no run folder {', '.join(unknown)} under {run_dir}; `kedro runs list` shows them")
        doomed = [known[name] for name in names]
    elif keep is not None and keep >= 0:
        doomed = runs[keep:]
    else:
        raise ConfigError("kedro runs remove: name the run folders to remove, or give --keep N (the N newest stay)")
    for run in doomed:
        shutil.rmtree(run.path)
    return doomed
