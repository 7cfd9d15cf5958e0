"""What many tests build: tiny parameters, tiny FineFractalDB settings, scratch copies of the project, tiny
models and images. A test file imports what it shares with another from here, never from a ``test_*`` module.

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
from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig
from fdsml.ifs.render import RenderSettings

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


TINY_RETRIEVAL = {
    "starts": [
        {"name": "scratch", "backbone": "resnet18"},
        {"name": "fdsml", "checkpoint": "pretrained_model", "backbone": "resnet18"},
    ],
    "seeds": [0],
    "data": {"dataset": "digits", "image_size": 16, "batch_size": 64, "eval_batch_size": 512, "flip": False},
    "embedding": {"embedding_dim": 8},
    "train": {"max_steps": 2, "device": "cpu", "freeze_backbone_steps": 1},
}
"""``params:retrieval`` for two CPU steps of scratch and the pre-trained model on digits at 16 px (no ``run_dir``)."""


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
FINGERPRINT_FRACTALS = FineFractalDBConfig(
    n_classes=3, instances_per_class=4, render=RenderSettings(size=32, points=600), class_filter=ClassFilter(size=96, points=4000)
)
"""3 classes x 4 instances, conf/base's seed: the fingerprint tests' table (fixture ``fingerprint_table``)."""
FINGERPRINT_SPEC = FamilySpec(FINEFRACTALDB, FINGERPRINT_FRACTALS)


def pretrain_fingerprint(config, table, world_size=1, spec=FINGERPRINT_SPEC, device="cpu") -> str:
    """The fingerprint of a pre-training run of ``config`` on ``table`` with ``world_size`` replicas on ``device``."""
    import torch

    from fdsml import fingerprints
    from fdsml.distributed import DistContext
    from fdsml.training import pretrain
    from fdsml.training.run_folders import run_fingerprint

    context = DistContext(torch.device(device), world_size=world_size)
    return run_fingerprint(pretrain.defining_run(config, spec, fingerprints.content_digest(table)), config.train, context)


SHARDED_FRACTALS = tiny_fractals(
    seed=2,
    outputs={"materialize": True, "shard_size": 10},
    holdout={"instance_fraction": 0.2, "class_fraction": 0.0},  # one instance of each class
)
"""The pre-training pipeline's table, written as shards, one instance of each class held out (with :data:`SHARDED_PRETRAIN`)."""
SHARDED_PRETRAIN = {
    "pa_triplet": {"filter": "each"},
    "model": {"backbone": "resnet18", "embedding_dim": 8},
    "data": {"source": "shards", "classes_per_batch": 3, "instances_per_class": 2},
    "train": {"max_steps": 3, "device": "cpu", "checkpoint_every": 2},
    "validation": {"every": 2, "triplets": 20},
}
"""Three steps on :data:`SHARDED_FRACTALS`'s shards, validated on its held-out instances every second step."""

FAMILY_PRETRAIN = {
    "pa_triplet": {"filter": "each"},
    "model": {"backbone": "resnet18", "embedding_dim": 8},
    "data": {"instances": "fresh", "classes_per_batch": 3, "instances_per_class": 2},
    "train": {"max_steps": 3, "device": "cpu", "checkpoint_every": 2},
}
"""Three steps on instances drawn fresh: a new formula family's pre-training in the families' pipeline tests."""
FAMILY_VALIDATION = {"n_triplets": 20, "n_base_codes": 2, "grid_triplets_per_filter": 1, "sweep": {"n_factors": 5, "n_noise_seeds": 2}}
"""The descriptor validation of a new formula family in the families' pipeline tests, at the smallest scale."""

REPLICA_IMAGES = 7
"""An odd count: two replicas get unequal shares (4 and 3)."""


def replica_images():
    """:data:`REPLICA_IMAGES` random 8 px images of 3 classes: the embedding loop's tests and its DDP replicas."""
    import numpy as np

    from fdsml.data import ImageRecords, ImageRecordsDataset, ImageTransform

    pixels = np.random.default_rng(0).integers(0, 256, (REPLICA_IMAGES, 8, 8), dtype=np.uint8)
    records = ImageRecords(labels=np.arange(REPLICA_IMAGES) % 3, images=pixels)
    return ImageRecordsDataset(records, ImageTransform(8, crop_fraction=1.0))


def tiny_classifier():
    """A seeded two-layer 3-class network for 8 px images."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))


def tiny_embedding_model():
    """A seeded ResNet-18 embedding model for 16 px images, 8-dimensional embeddings."""
    import torch

    from fdsml.models import build_model

    torch.manual_seed(0)
    return build_model("resnet18", img_size=16, embedding_dim=8)


def tiny_classification_splits(name: str = "tiny"):
    """Classification splits of 12 random 16 px images of 3 classes, the first 6 also the test split."""
    import numpy as np

    from fdsml.data import ImageRecords
    from fdsml.data.classification_datasets import ClassificationSplits

    images = np.random.default_rng(0).integers(0, 256, size=(12, 16, 16, 3), dtype=np.uint8)
    labels = np.arange(12) % 3
    return ClassificationSplits(name, ImageRecords(labels=labels, images=images), ImageRecords(labels=labels[:6], images=images[:6]), 3)


def two_kinds_of_image():
    """Retrieval splits of 12 images, class 0 with a dark left half, class 1 a dark right half: any random conv trunk tells them apart."""
    import numpy as np

    from fdsml.data import ImageRecords, RetrievalSplits

    images = np.full((12, 16, 16), 255, dtype=np.uint8)
    images[:6, :, :8] = 0
    images[6:, :, 8:] = 0
    images += np.random.default_rng(0).integers(0, 3, images.shape, dtype=np.uint8)
    labels = np.repeat([0, 1], 6)
    records = ImageRecords(labels=labels, images=images)
    return RetrievalSplits("toy", records, (1, 2), test=records)


TUNING_BASE = {name: yaml.safe_load((ROOT / f"conf/base/parameters_{name}.yml").read_text())[name] for name in ("pretrain", "retrieval", "tune")}
"""conf/base's ``pretrain``, ``retrieval`` and ``tune`` parameters as their files hold them: the tuning tests' start."""
LR_SPACE = {"key": "pretrain.optimizer.base_lr", "low": 0.05, "high": 2.0, "log": True}


def tune_params(tmp_path: Path, **changes) -> dict:
    """conf/base's ``params:tune`` searching :data:`LR_SPACE`, its storage under ``tmp_path``; ``changes`` replace its keys."""
    return TUNING_BASE["tune"] | {"storage_dir": str(tmp_path / "storage"), "space": [LR_SPACE]} | changes
