"""What many tests build: tiny parameters, tiny FineFractalDB settings, scratch copies of the project.

Fixtures that use them are in ``tests/conftest.py``. Each builder's arguments are the values its
callers differ in; every caller keeps its own.
"""

import shutil
import subprocess
from pathlib import Path

import yaml

from fdsml.config import parse, with_overlay
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB
from fdsml.ifs.finefractaldb import FineFractalDBConfig

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "fdsml"
NO_HOLDOUT = {"instance_fraction": 0.0, "class_fraction": 0.0}
"""``fractals.holdout`` that trains on every row."""


def tiny_fractals(
    *, seed: int | None = None, classes: int = 3, instances: int = 6, points: int = 600, class_filter: tuple[int, int] | None = (96, 4000), **blocks
) -> dict:
    """``params:fractals`` for ``classes`` x ``instances`` FineFractalDB codes rendered at 32 px with ``points``
    points; ``class_filter`` is its (size, points), None for no filter; ``seed`` None keeps conf/base's;
    ``blocks`` (``holdout``, ``outputs``) are added as given."""
    params = {"n_classes": classes, "instances_per_class": instances, "render": {"size": 32, "points": points}}
    params["class_filter"] = {"enabled": False} if class_filter is None else {"size": class_filter[0], "points": class_filter[1]}
    return params | ({} if seed is None else {"seed": seed}) | blocks


def tiny_pretrain(max_steps: int = 2, overlay: dict | None = None) -> dict:
    """``params:pretrain`` for a few CPU steps on P x K = 3 x 3 batches, 8-dimensional embeddings, no validation,
    a checkpoint each step; ``overlay`` (dotted keys or nested) changes it."""
    params = {
        "validation": {"every": 0},
        "data": {"classes_per_batch": 3, "instances_per_class": 3},
        "model": {"embedding_dim": 8},
        "train": {"max_steps": max_steps, "checkpoint_every": 1, "device": "cpu"},
    }
    return with_overlay(params, overlay or {})


def tiny_finefractaldb(**overrides) -> FineFractalDBConfig:
    """:func:`tiny_fractals` (seed 5) as FineFractalDB's typed settings, for tests that generate a table themselves."""
    return parse(FineFractalDBConfig, tiny_fractals(seed=5, **overrides), "fractals")


TINY_FRACTALS = tiny_finefractaldb()
"""3 classes x 6 instances, the class filter on: the training tests' table (fixture ``tiny_table``)."""
TINY_SPEC = FamilySpec(FINEFRACTALDB, TINY_FRACTALS)
UNFILTERED_FRACTALS = tiny_finefractaldb(classes=4, points=800, class_filter=None)
"""4 classes x 6 instances, every class kept: the validation and analysis tests' table (fixture ``tiny_unfiltered_table``)."""
UNFILTERED_SPEC = FamilySpec(FINEFRACTALDB, UNFILTERED_FRACTALS)
UNFILTERED_RENDER = UNFILTERED_FRACTALS.render


def copy_tracked(destination: Path, *paths: str) -> Path:
    """Copy the files git tracks or would track (under ``paths``, or all) into ``destination``, as they are on disk.

    Untracked files that git does not ignore come too, so a new file counts before it is committed;
    data, the virtual environment and local settings stay behind. Returns ``destination``.
    """
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *paths],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    return destination


def make_project(folder: Path, parameters: dict) -> Path:
    """A scratch project: the repository's conf, ``parameters`` as its local parameters, an empty ``data/``; code is shared."""
    folder.mkdir(parents=True)
    shutil.copytree(ROOT / "conf", folder / "conf", ignore=shutil.ignore_patterns("local"))
    shutil.copy2(ROOT / "pyproject.toml", folder / "pyproject.toml")
    (folder / "src").mkdir()  # the code is the repository's (imported before bootstrap_project)
    (folder / "conf/local").mkdir()
    (folder / "conf/local/parameters.yml").write_text(yaml.safe_dump(parameters))
    (folder / "data").mkdir()
    return folder
