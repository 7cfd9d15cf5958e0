"""A scratch project holding a study file (the repository's conf, the study under conf/studies/), and a cheap step that counts its calls."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support import make_project, tiny_fractals, tiny_pretrain

TINY_STUDY = {
    "title": "Tiny study",
    "question": "Does a two-step pre-training change digits retrieval?",
    "env": "base",
    "steps": ["pretrain", "frozen_probe", "finetune"],
    "overlay": {
        "fractals": tiny_fractals(seed=2, holdout={"instance_fraction": 0.0, "class_fraction": 0.0}),
        "pretrain": tiny_pretrain(2, {"train.checkpoint_every": 2}),
        "retrieval.data": {"dataset": "digits", "image_size": 32, "batch_size": 8},
        "retrieval.train": {"max_steps": 2, "freeze_backbone_steps": 1, "device": "cpu"},
    },
    "arms": {"scratch": {"study.steps": ["frozen_probe", "finetune"]}, "fdsl": {"pretrain.objective": "fdsl"}},
    "seeds": {"pretrain.train.seed": [0, 1], "retrieval.seeds": [[0], [1]]},
    "table": {"metrics": ["finetuned.recall@1", "frozen.recall@1"], "spread": "pretrain.train.seed", "reference": "scratch"},
}


CALLS: list[tuple] = []


def counted(params, state):
    """A cheap step: records its call and yields a value computed from the unit's parameters."""
    CALLS.append((params["pretrain"]["optimizer"]["base_lr"], params["pretrain"]["train"]["seed"]))
    if params["pretrain"]["optimizer"]["base_lr"] == 13.0:
        raise RuntimeError("this arm fails")
    return {"count.value": params["pretrain"]["optimizer"]["base_lr"] + params["pretrain"]["train"]["seed"]}


COUNTED = {
    **TINY_STUDY,
    "steps": ["count"],
    "arms": {"low": {"pretrain.optimizer.base_lr": 1.0}, "high": {"pretrain.optimizer.base_lr": 2.0}},
    "seeds": {"pretrain.train.seed": [0, 1]},
    "table": {"metrics": ["count.value"], "spread": "pretrain.train.seed", "reference": "low"},
}


def study_project(folder: Path, study: dict | None = None, name: str = "tiny") -> Path:
    """A project with ``study`` (default :data:`TINY_STUDY`) as conf/studies/<name>.yml."""
    project = make_project(folder, {})
    (project / "conf/studies" / f"{name}.yml").write_text(yaml.safe_dump(study or TINY_STUDY, sort_keys=False))
    return project
