"""The analysis pipeline end to end on a tiny configuration: a ResNet and a ViT checkpoint, a tiny table."""

import json

import numpy as np
import pytest
import torch
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset
from PIL import Image

from fdsml.config import ConfigError
from fdsml.catalog_datasets import CheckpointDataset
from fdsml.families.generation import generate_table
from fdsml.models import build_model, model_payload, save_checkpoint
from fdsml.models.starting_points import trunk_digest
from fdsml.pipelines.analysis import create_pipeline
from fdsml.pipelines.analysis.nodes import explain_resnets
from fdsml.data.fractals_config import parse_fractals_params
from tests.support import tiny_fractals

FRACTALS = tiny_fractals(seed=5, classes=4, points=800, class_filter=None)
PICTURES = ("embedding_map", "trajectory", "gradcam", "gradcam_similarity", "attention", "sample_grid", "triplet_grid")


def analysis_params(vit_path: str) -> dict:
    return {
        "device": "cpu",
        "batch_size": 16,
        "checkpoints": [{"name": "resnet", "path": None}, {"name": "vit", "path": vit_path}],
        "embedding_map": {"n_classes": 3, "max_instances_per_class": 6, "sweep_points": 5, "thumbnails": 3},
        "trajectory": {"n_alphas": 8, "thumbnails": 3},
        "real_images": {"n_images": 10},
        "gradcam": {"layer": "layer3", "n_show": 3},
        "attention": {"n_show": 2},
        "grids": {"n_classes": 3, "n_instances": 4, "triplets_per_filter": 1},
    }


def test_pipeline_draws_every_picture_and_writes_the_metrics(tmp_path):
    table, _ = generate_table(parse_fractals_params(FRACTALS).spec)
    torch.manual_seed(1)  # not analysis.seed: the untrained reference must differ from the checkpoint
    resnet = build_model("resnet18", img_size=32, embedding_dim=8)
    vit = build_model("vit_tiny_patch4", img_size=16, depth=2, embedding_dim=8)
    save_checkpoint(tmp_path / "resnet.pt", model_payload(resnet))
    save_checkpoint(tmp_path / "vit.pt", model_payload(vit))
    datasets = {
        "fractal_codes": MemoryDataset(table),
        "pretrained_model": CheckpointDataset(filepath=str(tmp_path / "resnet.pt")),
        "params:fractals": MemoryDataset(FRACTALS),
        "params:analysis": MemoryDataset(analysis_params(str(tmp_path / "vit.pt"))),
        "analysis_metrics": JSONDataset(filepath=str(tmp_path / "metrics.json")),
    }
    for picture in PICTURES:
        datasets[f"analysis_{picture}"] = MatplotlibDataset(filepath=str(tmp_path / f"{picture}.png"))
    SequentialRunner().run(create_pipeline(), DataCatalog(datasets))

    for picture in PICTURES:
        with Image.open(tmp_path / f"{picture}.png") as image:
            assert min(image.size) > 200, picture
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["checkpoints"]["vit"] == str(tmp_path / "vit.pt")
    assert metrics["pretrained_model"] == {"checkpoint": "pretrained_model", "trunk_digest": trunk_digest(model_payload(resnet))}
    smoothness = metrics["trajectory"]["largest_over_median_step"]
    # >= 1 by definition; null (infinite) when most steps of the tiny path render the same image
    assert set(smoothness) == {"resnet", "vit"} and all(v is None or v >= 1 for v in smoothness.values())
    gradcam = metrics["gradcam"]
    assert gradcam["n_images"] == 10 and gradcam["dataset"] == "digits"
    assert list(gradcam["mean_cosine"]) == ["resnet vs untrained resnet18"]  # the ViT is skipped
    assert 0.0 <= gradcam["mean_cosine"]["resnet vs untrained resnet18"] <= 1.0


def test_an_unknown_reference_checkpoint_is_named():
    params = {"checkpoints": [{"name": "fdsml"}], "gradcam": {"reference": "imagenet"}}
    with pytest.raises(ConfigError, match=r"analysis\.gradcam\.reference: 'imagenet'"):
        explain_resnets({}, params)
