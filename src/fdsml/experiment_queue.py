"""Studies as DVC experiments: each arm is ``dvc exp run`` with ``-S file:key=value`` settings.

A study script lists its arms as :class:`Experiment` objects; ``--print-dvc`` prints them as
commands, ``--queue`` adds them to the DVC experiment queue (``dvc exp run --queue``), which
``dvc queue start -j N`` runs and ``dvc exp show`` compares. A queued experiment runs in a copy of
the last commit plus the workspace's tracked changes, so everything an arm needs must be in its
settings (``conf/local`` does not travel).
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


def experiment_name(text: str) -> str:
    """``text`` as an experiment name (a git ref name: letters, digits and dashes)."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def settings(files: Mapping[str, str], values: Iterable[tuple[str, object]]) -> tuple[str, ...]:
    """``-S`` values ``file:key=value`` for dotted keys, each in the parameter file of its first part (``files``)."""
    return tuple(f"{files[key.split('.')[0]]}:{key}={json.dumps(value)}" for key, value in values)


@dataclass(frozen=True)
class Experiment:
    """One arm of a study: its name, its settings and the stage it needs (None: the whole pipeline)."""

    name: str
    settings: tuple[str, ...]
    stage: str | None = None

    def command(self, queue: bool = False) -> list[str]:
        target = [self.stage] if self.stage else []
        return ["dvc", "exp", "run", *target, *(["--queue"] if queue else []), "-n", self.name, *(a for s in self.settings for a in ("-S", s))]


def printed(experiments: Iterable[Experiment], queue: bool = False) -> list[str]:
    """The experiments as shell commands."""
    return [shlex.join(experiment.command(queue)) for experiment in experiments]


def queue(experiments: Iterable[Experiment], repository: Path, dvc: str = "dvc") -> list[str]:
    """Add every experiment to ``repository``'s DVC queue; returns their names. Fails naming the arm DVC refused."""
    names = []
    for experiment in experiments:
        command = [dvc, *experiment.command(queue=True)[1:]]
        done = subprocess.run(command, cwd=repository, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"dvc refused to queue {experiment.name!r}:\n{done.stderr.strip() or done.stdout.strip()}")
        logger.info("queued %s", experiment.name)
        names.append(experiment.name)
    return names


def next_steps(jobs: int = 1) -> list[str]:
    """What runs and compares the queued experiments."""
    return [f"dvc queue start -j {jobs}", "dvc queue status", "dvc exp show --only-changed"]
