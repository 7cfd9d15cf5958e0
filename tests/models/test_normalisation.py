"""One input normalisation: every consumer hands the model the same [0, 1] pixels, and the model file's
recorded mean and std are what the trunk sees, after loading, after a fine-tuning start and in the export."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fdsml.analysis.inputs import RealImages
from fdsml.data import ImageRecords, ImageRecordsDataset, fractal_input
from fdsml.errors import CheckpointError
from fdsml.evaluation.robustness import _transforms
from fdsml.models import build_model, model_payload
from fdsml.models.checkpoint import model_from_payload
from fdsml.models.export import Preprocessing
from fdsml.models.normalisation import INPUT_MEAN, INPUT_STD
from fdsml.models.starting_points import StartingPoint, build_from_start
from fdsml.training.classification import eval_transform
from fdsml.training.retrieval import RetrievalData

SIZE = 16


def _grey_image() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, size=(SIZE, SIZE), dtype=np.uint8)


def _consumer_inputs(grey: np.ndarray) -> dict[str, torch.Tensor]:
    """The (3, SIZE, SIZE) tensor each consumer hands the model for one grey image already at the model's size."""
    records = ImageRecords(labels=np.array([0]), images=grey[None])
    views = {
        "pre-training, its validation, fractal pictures": fractal_input(grey, SIZE),
        "frozen probe, retrieval": RetrievalData(image_size=SIZE, crop_fraction=1.0).transform(train=False),
        "classification": eval_transform(SIZE, 1.0),
        "robustness": _transforms({"source": "generated", "view": None}, (SIZE, 1.0))[0],
    }
    inputs = {name: view if torch.is_tensor(view) else ImageRecordsDataset(records, view)[0]["image"] for name, view in views.items()}
    framed = np.pad(grey, 1)  # the analysis keeps the test view's centre crop: 18 px (16 / 0.875) cropped to 16
    inputs["analysis pictures"] = RealImages(ImageRecords(labels=np.array([0]), images=framed[None]), "digits").batch(SIZE)[0]
    return inputs


def _trunk_input(model, image: torch.Tensor) -> torch.Tensor:
    seen = []
    handle = model.backbone.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    with torch.no_grad():
        model(image[None])
    handle.remove()
    return seen[0][0]


def test_every_consumer_feeds_the_trunk_the_recorded_normalisation_of_the_same_pixels():
    grey = _grey_image()
    pixels = torch.from_numpy(grey).float().div(255).expand(3, -1, -1)
    model = build_model("resnet18", embedding_dim=4, img_size=SIZE).eval()
    expected = (pixels - torch.tensor(INPUT_MEAN).view(3, 1, 1)) / torch.tensor(INPUT_STD).view(3, 1, 1)
    for consumer, image in _consumer_inputs(grey).items():
        torch.testing.assert_close(image, pixels, msg=f"{consumer} does not hand the model pixels / 255")
        torch.testing.assert_close(_trunk_input(model, image), expected, msg=f"{consumer}: the trunk sees another input")


def test_the_recorded_normalisation_survives_the_model_file_a_fine_tuning_start_and_the_export():
    chosen = {"input_mean": [0.5, 0.4, 0.3], "input_std": [0.2, 0.25, 0.5]}
    payload = model_payload(build_model("resnet18", embedding_dim=4, img_size=SIZE, **chosen))
    assert {k: payload["model"][k] for k in chosen} == chosen
    image = torch.rand(3, SIZE, SIZE)
    expected = (image - torch.tensor(chosen["input_mean"]).view(3, 1, 1)) / torch.tensor(chosen["input_std"]).view(3, 1, 1)
    loaded = model_from_payload(payload)
    started = build_from_start(StartingPoint("pretrained", "file"), seed=0, payload=payload, head="classifier", num_classes=3)
    for model in (loaded, started.eval()):
        torch.testing.assert_close(_trunk_input(model, image), expected)
    config = Preprocessing().data_config(loaded.spec)
    assert list(config["mean"]) == chosen["input_mean"] and list(config["std"]) == chosen["input_std"]


def test_a_model_file_without_a_recorded_normalisation_is_refused_by_name():
    payload = model_payload(build_model("resnet18", embedding_dim=4, img_size=SIZE))
    for key in ("input_mean", "input_std"):
        del payload["model"][key]
    with pytest.raises(CheckpointError, match="records no input normalisation"):
        model_from_payload(payload)
    with pytest.raises(CheckpointError, match="records no input normalisation"):
        build_from_start(StartingPoint("old", "file"), seed=0, payload=payload)
