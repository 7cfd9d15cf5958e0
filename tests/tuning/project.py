"""A scratch project for the tune pipeline: the repository's conf, tiny parameters, a study of a few cheap trials."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from fdsml.config import with_overlay
from tests.faults.kill_harness import ROOT, make_project

FRACTALS = {
    "seed": 2,
    "n_classes": 3,
    "instances_per_class": 6,
    "class_filter": {"size": 64, "points": 3000},
    "render": {"size": 32, "points": 600},
    "holdout": {"instance_fraction": 0.25, "class_fraction": 0.0},
}
PRETRAIN = {
    "pa_triplet": {"filter": "same"},
    "data": {"classes_per_batch": 3, "instances_per_class": 3},
    "model": {"embedding_dim": 8},
    "train": {"max_steps": 4, "checkpoint_every": 2, "log_every": 1, "device": "cpu"},
    "validation": {"every": 1, "triplets": 20, "max_images": 16, "probe": {"max_images": 40}},
}
TUNE = {
    "study": "tiny",
    "space": [{"key": "pretrain.optimizer.base_lr", "low": 0.01, "high": 3.0, "log": True}],
    "budget": {"n_trials": 3},
    "sampler": {"n_startup_trials": 1},
    "pruner": {"name": "median", "n_startup_trials": 1, "n_warmup_steps": 2},
}


def tune_project(folder: Path, tune: dict | None = None, pretrain: dict | None = None) -> Path:
    """A project whose conf/local holds the tiny fractals, pre-training and study (``tune`` merged over :data:`TUNE`)."""
    project = make_project(folder)
    local = {
        "fractals": FRACTALS,
        "pretrain": with_overlay(PRETRAIN, pretrain or {}),
        "tune": with_overlay(TUNE, tune or {}),
    }
    (project / "conf/local/parameters.yml").write_text(yaml.safe_dump(local))
    return project


def kedro_tune(project: Path, *extra: str, wait: bool = True):
    """``kedro run --pipelines=tune`` in ``project``: the finished process, or the running one (``wait=False``,
    its output in ``project/tune.log``: a pipe nobody reads could fill and stop it)."""
    env = os.environ | {
        "KEDRO_DISABLE_TELEMETRY": "1",
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
    }
    command = ["kedro", "run", "--pipelines=tune", *extra]
    if not wait:
        with open(project / "tune.log", "a") as log:
            return subprocess.Popen(command, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
