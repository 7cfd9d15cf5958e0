"""The whole chain under DVC in a scratch git repository of the project, with parameters small enough for a test."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from tests.fresh_clone import BIN
from tests.support import NO_HOLDOUT, copy_tracked, tiny_fractals, tiny_pretrain

TINY = {
    "fractals": tiny_fractals(points=800, class_filter=(128, 8000), holdout=NO_HOLDOUT),
    "pretrain": tiny_pretrain(),
    "validate_descriptor": {"n_triplets": 20, "n_base_codes": 1, "grid_triplets_per_filter": 1, "sweep": {"n_noise_seeds": 1}},
    "retrieval": {
        "data": {"image_size": 16, "batch_size": 64},
        "embedding": {"embedding_dim": 8},
        "train": {"max_steps": 2, "freeze_backbone_steps": 1, "device": "cpu"},
        "n_example_queries": 2,
    },
    "classification": {"image_size": 32, "batch_size": 64, "train": {"max_steps": 2, "device": "cpu"}},
    "robustness": {"max_images": 4, "severities": [1, 5], "device": "cpu"},
    "analysis": {
        "device": "cpu",
        "embedding_map": {"n_classes": 3, "max_instances_per_class": 6, "sweep_points": 5, "thumbnails": 2, "n_neighbors": 5},
        "trajectory": {"n_alphas": 8, "thumbnails": 2},
        "real_images": {"n_images": 12},
        "gradcam": {"n_show": 2},
        "grids": {"n_classes": 2, "n_instances": 2, "triplets_per_filter": 1},
    },
}


def dvc_env(extra: dict | None = None) -> dict:
    """The environment of a user's shell in the project's virtual environment (``extra`` set on top)."""
    return os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "KEDRO_DISABLE_TELEMETRY": "1"} | (extra or {})


def run_checked(args, cwd, env=None) -> str:
    """``args`` run in ``cwd`` in :func:`dvc_env`: its output, or the test fails showing what it printed."""
    result = subprocess.run(args, cwd=cwd, env=dvc_env(env), capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def stages_ran(output: str) -> set[str]:
    """The stages a ``dvc repro`` output says it ran."""
    return set(re.findall(r"Running stage '([^']+)'", output))


def output_paths(folder: Path) -> list[Path]:
    """Every output, metric and plot the stages of ``folder``'s dvc.yaml write."""
    stages = yaml.safe_load((folder / "dvc.yaml").read_text())["stages"]
    paths = []
    for stage in stages.values():
        for kind in ("outs", "metrics", "plots"):
            paths += [folder / (e if isinstance(e, str) else next(iter(e))) for e in stage.get(kind, [])]
    return paths


def tiny_chain(copy: Path) -> str:
    """A git repository in ``copy`` of the project with the TINY parameters, after ``dvc repro``: its output."""
    copy_tracked(copy)
    (copy / "conf/local/parameters.yml").write_text(yaml.safe_dump(TINY))
    run_checked(["git", "init", "-q"], copy)
    run_checked(["git", "add", "-A"], copy)
    run_checked(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy"], copy)
    return run_checked(["dvc", "repro"], copy)


def copy_of_chain(built: Path, copy: Path) -> None:
    """``copy`` becomes a copy of the repository ``built`` (git history, DVC cache, outputs, their times): a second
    ``dvc repro`` of the same chain there costs minutes, and it would give the same outputs (tests/project/conftest.py)."""
    shutil.copytree(built, copy, symlinks=True, dirs_exist_ok=True)
