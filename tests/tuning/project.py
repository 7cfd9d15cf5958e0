"""A scratch project for the tune pipeline: the repository's conf, tiny parameters, a study of a few cheap trials."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fdsml.config import with_overlay
from tests.support import ROOT, make_project, tiny_fractals, tiny_pretrain

FRACTALS = tiny_fractals(seed=2, class_filter=(64, 3000), holdout={"instance_fraction": 0.25, "class_fraction": 0.0})
PRETRAIN = tiny_pretrain(
    4,
    {
        "pa_triplet.filter": "same",
        "train": {"checkpoint_every": 2, "log_every": 1},
        "validation": {"every": 1, "triplets": 20, "max_images": 16, "probe": {"max_images": 40}},
    },
)
TUNE = {
    "study": "tiny",
    "space": [{"key": "pretrain.optimizer.base_lr", "low": 0.01, "high": 3.0, "log": True}],
    "budget": {"n_trials": 3},
    "sampler": {"n_startup_trials": 1},
    "pruner": {"name": "median", "n_startup_trials": 1, "n_warmup_steps": 2},
}


def tune_project(folder: Path, tune: dict | None = None, pretrain: dict | None = None) -> Path:
    """A project whose conf/local holds the tiny fractals, pre-training and study (``tune`` merged over :data:`TUNE`)."""
    local = {
        "fractals": FRACTALS,
        "pretrain": with_overlay(PRETRAIN, pretrain or {}),
        "tune": with_overlay(TUNE, tune or {}),
    }
    return make_project(folder, local)


def kedro_tune(project: Path, *extra: str, wait: bool = True):
    """``kedro run --pipelines=tune`` in ``project``: the finished process, or the running one (``wait=False``,
    its output in ``project/tune.log``: a pipe nobody reads could fill and stop it)."""
    return kedro(project, "run", "--pipelines=tune", *extra, wait=wait)


def kedro(project: Path, *arguments: str, wait: bool = True):
    """``kedro ARGUMENTS`` in ``project`` with the repository's code (see :func:`kedro_tune`)."""
    env = os.environ | {
        "KEDRO_DISABLE_TELEMETRY": "1",
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
    }
    command = ["kedro", *arguments]
    if not wait:
        with open(project / "tune.log", "a") as log:
            return subprocess.Popen(command, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
