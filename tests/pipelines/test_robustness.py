"""The robustness pipeline end to end after a tiny classification run: generated corrupted set (cached), or released files."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset
from kedro_datasets.pandas import ParquetDataset
from kedro_datasets.text import TextDataset

from fdsml.catalog_datasets import ArrayShardsDataset, CheckpointDataset, OptionalDataset
from fdsml.evaluation.corruptions import CORRUPTION_GROUPS, benchmark_corruptions
from fdsml.models import build_model, load_checkpoint_file, model_payload, save_checkpoint
from fdsml.models.starting_points import trunk_digest
from fdsml.evaluation import robustness
from fdsml.pipelines.classification import create_pipeline as classification_pipeline
from fdsml.pipelines.robustness import create_pipeline as robustness_pipeline



@pytest.fixture(scope="module")
def classifiers(tmp_path_factory):
    """Two digits classifiers (scratch and a tiny checkpoint written here), fine-tuned for two steps."""
    folder = tmp_path_factory.mktemp("classification")
    torch.manual_seed(0)
    save_checkpoint(folder / "pre.pt", model_payload(build_model("resnet18", embedding_dim=8, img_size=32)))
    params = {
        "starting_points": [{"name": "scratch"}, {"name": "fdsml", "checkpoint": "pretrained_model"}],
        "batch_size": 32,
        "train": {"max_steps": 2, "device": "cpu"},
        "run_dir": str(folder / "run"),
    }
    catalog = DataCatalog(
        {
            "params:classification": MemoryDataset(params),
            "pretrained_model": CheckpointDataset(filepath=str(folder / "pre.pt")),
            "fine_tuned_classifiers": CheckpointDataset(filepath=str(folder / "classifiers.pt")),
            "classification_metrics": JSONDataset(filepath=str(folder / "metrics.json")),
            "classification_table": MemoryDataset(),
            "classification_history": MemoryDataset(),
        }
    )
    SequentialRunner().run(classification_pipeline(), catalog)
    return params, folder / "classifiers.pt"


def classification_errors(classifiers) -> dict[str, float]:
    """1 - the classification pipeline's top-1 of each digits classifier (scored at its test view: crop 0.875)."""
    metrics = json.loads((classifiers[1].parent / "metrics.json").read_text())
    return {start: 1 - scores["top1"] for start, scores in metrics["results"]["digits"].items()}


def catalog_for(tmp_path, classifiers, robustness_params):
    classification_params, models = classifiers
    shards = {"type": "fdsml.catalog_datasets.ArrayShardsDataset", "filepath": str(tmp_path / "corrupted")}
    return DataCatalog(
        {
            "params:classification": MemoryDataset(classification_params),
            "params:robustness": MemoryDataset(robustness_params),
            "fine_tuned_classifiers": CheckpointDataset(filepath=str(models)),
            "corrupted_test_set": ArrayShardsDataset(filepath=str(tmp_path / "corrupted")),
            "corrupted_test_set_stored": OptionalDataset(shards),
            "robustness_errors": ParquetDataset(filepath=str(tmp_path / "errors.parquet")),
            "robustness_metrics": JSONDataset(filepath=str(tmp_path / "metrics.json")),
            "robustness_table": TextDataset(filepath=str(tmp_path / "metrics.md")),
            "corruption_examples": MatplotlibDataset(filepath=str(tmp_path / "examples.png")),
        }
    )


def test_generated_set_gives_group_errors_per_starting_point_and_is_reused(tmp_path, classifiers, monkeypatch):
    params = {"max_images": 3, "severities": [1, 5], "device": "cpu"}
    SequentialRunner().run(robustness_pipeline(), catalog_for(tmp_path, classifiers, params))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["source"] == "generated" and metrics["images"] == 3 and set(metrics["results"]) == {"scratch", "fdsml"}
    pretrained = trunk_digest(load_checkpoint_file(classifiers[1].parent / "pre.pt"))
    assert {start: (r["checkpoint"], r["trunk_digest"]) for start, r in metrics["results"].items()} == {
        "scratch": (None, ""), "fdsml": ("pretrained_model", pretrained)
    }
    errors = pd.read_parquet(tmp_path / "errors.parquet")
    assert len(errors) == 2 * 19 * 2 and errors["error"].between(0, 1).all()
    for start, result in metrics["results"].items():
        mine = errors[errors["model"] == start].groupby("corruption")["error"].mean()
        for group, names in CORRUPTION_GROUPS["cifar10_c"].items():
            assert result[group] == pytest.approx(mine[list(names)].mean())
        assert result["mean"] == pytest.approx(mine.mean()) and 0 <= result["clean_error"] <= 1
    assert (tmp_path / "metrics.md").read_text().splitlines()[0] == (
        "| starting point | clean | noise | blur | weather | digital | geometric | mean |"
    )
    assert (tmp_path / "examples.png").stat().st_size > 0
    manifest = json.loads((tmp_path / "corrupted" / "manifest.json").read_text())
    assert manifest["count"] == 3 * (1 + 19 * 2) and manifest["keys"][:3] == ["clean", "gaussian_noise/1", "gaussian_noise/5"]

    def no_generation(*args, **kwargs):
        raise AssertionError("the stored corrupted set is up to date and must be reused")

    monkeypatch.setattr(robustness, "generated_shards", no_generation)
    SequentialRunner().run(robustness_pipeline(), catalog_for(tmp_path, classifiers, params))
    assert pd.read_parquet(tmp_path / "errors.parquet").equals(errors)


def test_released_cifar10_c_files_are_read_in_place(tmp_path, classifiers):
    released = tmp_path / "CIFAR-10-C"
    released.mkdir()
    rng = np.random.default_rng(0)
    np.save(released / "labels.npy", np.tile([3, 7], 5))
    for corruption in benchmark_corruptions("cifar10_c"):
        np.save(released / f"{corruption}.npy", rng.integers(0, 256, size=(10, 32, 32, 3), dtype=np.uint8))
    params = {"released_root": str(released), "device": "cpu"}
    SequentialRunner().run(robustness_pipeline(), catalog_for(tmp_path, classifiers, params))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["source"] == "released" and metrics["images"] == 360  # the clean digits test split
    assert {start: r["clean_error"] for start, r in metrics["results"].items()} == classification_errors(classifiers)
    assert len(pd.read_parquet(tmp_path / "errors.parquet")) == 2 * 19 * 5
    assert json.loads((tmp_path / "corrupted" / "manifest.json").read_text())["count"] == 0


def test_the_clean_error_of_a_generated_set_is_one_minus_the_classification_top1(tmp_path, classifiers, monkeypatch):
    """Clean and "corrupted" images (corruptions replaced by the identity, for speed) at the classifiers' test view."""

    def unchanged(clean, corruptions, seed, severities):
        return (clean.images for _ in range(1 + len(corruptions) * len(severities)))

    monkeypatch.setattr(robustness, "generated_shards", unchanged)
    params = {"max_images": None, "severities": [1], "device": "cpu"}
    SequentialRunner().run(robustness_pipeline(), catalog_for(tmp_path, classifiers, params))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["source"] == "generated" and metrics["images"] == 360
    expected = classification_errors(classifiers)
    assert {start: r["clean_error"] for start, r in metrics["results"].items()} == expected
    errors = pd.read_parquet(tmp_path / "errors.parquet")
    assert errors.groupby("model")["error"].unique().map(list).to_dict() == {s: [e] for s, e in expected.items()}


def test_a_dataset_without_fine_tuned_classifiers_is_refused(tmp_path, classifiers):
    with pytest.raises(Exception, match="'cifar10' is not among classification.datasets"):
        SequentialRunner().run(robustness_pipeline(), catalog_for(tmp_path, classifiers, {"dataset": "cifar10"}))
