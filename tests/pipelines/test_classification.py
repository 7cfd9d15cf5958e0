"""The classification pipeline end to end on digits, scratch and a tiny checkpoint written here, through a real catalog."""

import json

import pandas as pd
import pytest
import torch
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from kedro_datasets.pandas import CSVDataset
from kedro_datasets.text import TextDataset

from fdsml.catalog_datasets import CheckpointDataset
from fdsml.models import build_model, load_checkpoint_file, model_payload, save_checkpoint
from fdsml.models.starting_points import trunk_digest
from fdsml.pipelines.classification import create_pipeline
from fdsml.models import model_from_payload

from ..own_images import write_image_folder


def tiny_params(tmp_path):
    return {
        "datasets": [{"name": "digits"}],
        "starting_points": [{"name": "scratch"}, {"name": "fdsml", "checkpoint": "pretrained_model"}],
        "image_size": 32,
        "batch_size": 32,
        "train": {"max_steps": 2, "device": "cpu"},
        "run_dir": str(tmp_path / "run"),
    }


def catalog_for(tmp_path, params, checkpoint):
    return DataCatalog(
        {
            "params:classification": MemoryDataset(params),
            "pretrained_model": CheckpointDataset(filepath=str(checkpoint)),
            "fine_tuned_classifiers": CheckpointDataset(filepath=str(tmp_path / "classifiers.pt")),
            "classification_metrics": JSONDataset(filepath=str(tmp_path / "metrics.json")),
            "classification_table": TextDataset(filepath=str(tmp_path / "metrics.md")),
            "classification_history": CSVDataset(filepath=str(tmp_path / "history.csv")),
        }
    )


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("pretrained") / "pretrained_model.pt"
    torch.manual_seed(0)
    save_checkpoint(path, model_payload(build_model("resnet18", embedding_dim=8, img_size=32), objective="pa_triplet"))
    return path


def test_pipeline_fine_tunes_every_starting_point_and_reports_top1_top5(tmp_path, tiny_checkpoint):
    SequentialRunner().run(create_pipeline(), catalog_for(tmp_path, tiny_params(tmp_path), tiny_checkpoint))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert set(metrics["results"]["digits"]) == {"scratch", "fdsml"}
    for scores in metrics["results"]["digits"].values():
        assert 0 <= scores["top1"] <= scores["top5"] <= 1 and scores["steps"] == 2
    # which trunk each row began from, by content: the report shows them beside that model only
    started = {start: (scores["checkpoint"], scores["trunk_digest"]) for start, scores in metrics["results"]["digits"].items()}
    assert started == {"scratch": (None, ""), "fdsml": ("pretrained_model", trunk_digest(load_checkpoint_file(tiny_checkpoint)))}
    classifier = load_checkpoint_file(tmp_path / "classifiers.pt")["models"]["digits/fdsml"]
    assert classifier["metadata"]["start_trunk_digest"] == started["fdsml"][1]
    table = (tmp_path / "metrics.md").read_text()
    assert table.startswith("Classification on `digits`: ") and "| scratch, fine-tuned | 0.001 (classification.optimizer.base_lr) |" in table
    for scores in metrics["results"]["digits"].values():  # its baselines, on the same 360 test images
        assert set(scores["baselines"]) == {"raw pixels", "its frozen trunk"} and scores["images"] == 360
    history = pd.read_csv(tmp_path / "history.csv")
    assert history.groupby("start")["step"].max().to_dict() == {"fdsml": 2, "scratch": 2}
    models = CheckpointDataset(filepath=str(tmp_path / "classifiers.pt")).load()["models"]
    assert set(models) == {"digits/scratch", "digits/fdsml"}
    model = model_from_payload(models["digits/fdsml"])
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 10)


def test_pipeline_refuses_a_missing_checkpoint_naming_the_pretrain_pipeline(tmp_path):
    with pytest.raises(Exception, match="kedro run --pipelines=pretrain"):
        SequentialRunner().run(create_pipeline(), catalog_for(tmp_path, tiny_params(tmp_path), tmp_path / "missing.pt"))


def test_a_class_folder_of_your_own_with_train_and_test_subfolders_is_fine_tuned_and_scored(tmp_path, tiny_checkpoint):
    root = tmp_path / "pets"
    write_image_folder(root / "train", classes=3, per_class=4)
    write_image_folder(root / "test", classes=3, per_class=2, seed=1)
    params = tiny_params(tmp_path) | {"datasets": [{"name": "imagefolder", "root": str(root)}], "batch_size": 4}
    SequentialRunner().run(create_pipeline(), catalog_for(tmp_path, params, tiny_checkpoint))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["datasets"] == {"imagefolder": str(root)} and set(metrics["results"]["imagefolder"]) == {"scratch", "fdsml"}
    for scores in metrics["results"]["imagefolder"].values():
        # 6 test images of 3 classes: top-1 is a multiple of 1/6, and top-5 covers every class
        assert scores["top1"] * 6 == pytest.approx(round(scores["top1"] * 6)) and scores["top5"] == 1.0 and scores["steps"] == 2
