"""The exported folder loads in plain timm (``local-dir:``) and gives the project's trunk features exactly."""

import json

import pandas as pd
import pytest
import timm
import torch
from safetensors.torch import load_file

from fdsml.config import ConfigError
from fdsml.catalog_datasets import TimmFolderDataset
from fdsml.losses.couce import CouCESettings, build_couce_objective
from fdsml.models import build_model, model_payload
from fdsml.models.export import export_trunk, parse_export_params
from fdsml.models.normalisation import INPUT_MEAN, INPUT_STD
from fdsml.models.starting_points import PRETRAINED, start_record
from fdsml.pipelines.export.nodes import export_backbone
from fdsml.data.fractals_config import parse_fractals_params

FRACTALS = {"n_classes": 7, "instances_per_class": 3, "seed": 5, "render": {"size": 32, "points": 900}}
HISTORY = pd.DataFrame({"step": [1, 2, 3], "loss": [0.9, 0.5, 0.25], "lr": [0.1, 0.1, 0.1]})


def _payload(model, **metadata):
    return model_payload(model, **({"objective": "pa_triplet", "filter": "diff", "mode": "batch", "steps": 3} | metadata))


def _export_and_load(payload, folder, params=None):
    export_trunk(payload, parse_export_params(params or {}), card="# card\n").save(folder)
    torch.manual_seed(12345)  # a different random initialisation: only loaded weights can match
    return timm.create_model(f"local-dir:{folder}", pretrained=True, num_classes=0).eval()


@pytest.mark.parametrize(
    ("name", "options", "architecture"),
    [
        ("resnet18", {"img_size": 32}, "resnet18"),
        ("vit_tiny_patch4", {"img_size": 16, "depth": 2}, "vit_tiny_patch16_224"),
    ],
)
def test_timm_loads_the_folder_and_returns_the_trunk_features_exactly(tmp_path, name, options, architecture):
    torch.manual_seed(0)
    model = build_model(name, embedding_dim=8, **options).eval()
    loaded = _export_and_load(_payload(model), tmp_path / "export")
    images = torch.rand(3, 3, options["img_size"], options["img_size"])
    with torch.no_grad():  # timm's user normalises as pretrained_cfg says; the project's model does it itself
        assert torch.equal(loaded(model.normalise(images)), model.features(images))
    config = json.loads((tmp_path / "export/config.json").read_text())
    assert config["architecture"] == architecture and config["num_classes"] == 0
    cfg = config["pretrained_cfg"]
    assert cfg["input_size"] == [3, options["img_size"], options["img_size"]]
    assert cfg["mean"] == pytest.approx(INPUT_MEAN) and cfg["std"] == pytest.approx(INPUT_STD)
    assert cfg["crop_pct"] == 1.0 and cfg["interpolation"] == "bilinear"
    assert timm.data.resolve_data_config(model=loaded)["input_size"] == (3, options["img_size"], options["img_size"])


def test_grey_models_and_their_recorded_normalisation_travel_in_the_config(tmp_path):
    torch.manual_seed(0)
    model = build_model("resnet18", embedding_dim=8, img_size=24, in_chans=1, input_mean=[0.5], input_std=[0.25]).eval()
    preprocessing = {"crop_pct": 0.875, "interpolation": "bicubic"}
    loaded = _export_and_load(_payload(model), tmp_path / "grey", {"preprocessing": preprocessing})
    images = torch.rand(2, 1, 24, 24)
    with torch.no_grad():
        assert torch.equal(loaded((images - 0.5) / 0.25), model.features(images))
    data = timm.data.resolve_data_config(model=loaded)
    assert data["input_size"] == (1, 24, 24) and tuple(data["mean"]) == (0.5,) and tuple(data["std"]) == (0.25,)
    assert data["crop_pct"] == 0.875 and data["interpolation"] == "bicubic"


def test_a_couce_trained_checkpoint_exports_as_the_plain_architecture(tmp_path):
    torch.manual_seed(0)
    model = build_model("resnet18", embedding_dim=8, img_size=32)
    objective = build_couce_objective(CouCESettings(), "proxy_anchor", 4, 8)
    optimiser = torch.optim.SGD([*model.parameters(), *objective.parameters()], lr=1e-3)
    for step in range(2):
        batch = {"image": torch.randn(8, 3, 32, 32), "label": torch.arange(8) % 4}
        loss, _ = objective(model, batch, step=step)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    loaded = _export_and_load(model_payload(model, couce=True), tmp_path / "couce")
    plain = timm.create_model("resnet18", pretrained=False, num_classes=0)
    assert set(load_file(tmp_path / "couce/model.safetensors")) == set(plain.state_dict())
    assert json.loads((tmp_path / "couce/config.json").read_text())["architecture"] == "resnet18"
    assert type(loaded) is type(plain)
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        features = model.features(images)
        assert torch.isfinite(features).all() and torch.equal(loaded(model.normalise(images)), features)


def test_the_node_writes_a_card_with_data_objective_recipe_and_metrics(tmp_path):
    torch.manual_seed(0)
    spec = parse_fractals_params(FRACTALS).spec
    payload = _payload(build_model("resnet18", embedding_dim=8, img_size=32), data={"family": spec.family.title, **spec.family.describe(spec.settings)})
    table = "| start | recall_at_1 |\n|---|---|\n| pretrained | 61.0 ± 0.0 |\n"
    metrics = {"scratch": start_record(None, None), "pretrained": start_record(PRETRAINED, payload)}
    export = export_backbone(payload, HISTORY, table, metrics, {"name": "my-fractal-net", "licence": "mit"})
    dataset = TimmFolderDataset(str(tmp_path / "exported"))
    dataset.save(export)
    card = (tmp_path / "exported/README.md").read_text()
    assert card.startswith("---\nlicense: mit\nlibrary_name: timm")
    assert "# my-fractal-net" in card and "7 x 3 (seed 5)" in card and "32 px, 900 points, patch" in card
    assert "| objective | pa_triplet |" in card and "| candidate filter | diff |" in card
    assert "0.9000" in card and "0.2500" in card and "| pretrained | 61.0 ± 0.0 |" in card
    assert dataset.load().num_features == 512
    without = export_backbone(payload, HISTORY, None, None, {}).card
    assert "Not run for this checkpoint" in without and "`kedro run --pipelines=retrieval` measures it" in without


def test_the_card_never_shows_retrieval_numbers_of_another_model():
    """Pre-trained again (another trunk) and exported without running retrieval: the table on disk is the old model's."""
    torch.manual_seed(0)
    earlier = _payload(build_model("resnet18", embedding_dim=8, img_size=32))
    torch.manual_seed(1)
    now = _payload(build_model("resnet18", embedding_dim=8, img_size=32))
    table = "| start | recall_at_1 |\n|---|---|\n| fdsml | 61.0 ± 0.0 |\n"
    earlier_metrics = {"scratch": start_record(None, None), "fdsml": start_record(PRETRAINED, earlier)}
    card = export_backbone(now, HISTORY, table, earlier_metrics, {}).card
    assert "61.0" not in card and "Not run for this checkpoint: no retrieval results on disk began from it" in card
    assert "61.0" not in export_backbone(now, HISTORY, table, {"fdsml": {"dataset": "omniglot"}}, {}).card  # records none
    assert "| fdsml | 61.0 ± 0.0 |" in export_backbone(earlier, HISTORY, table, earlier_metrics, {}).card


def test_a_model_file_without_its_recipe_says_so_rather_than_describing_todays_configuration():
    card = export_backbone(_payload(build_model("resnet18", embedding_dim=8, img_size=32)), HISTORY, None, None, {}).card
    assert "| optimizer | not recorded: this model file predates fdsml recording it" in card
    assert "## Pre-training data: formula-driven images\n\nnot recorded" in card


def test_wrong_export_parameters_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="export.preprocessing.crop_pct"):
        parse_export_params({"preprocessing": {"crop_pct": 0}})
    with pytest.raises(ConfigError, match=r"export.preprocessing.*mean"):  # the model file's normalisation, not a choice
        parse_export_params({"preprocessing": {"mean": [0.1, 0.2]}})
    with pytest.raises(Exception, match="kedro run --pipelines=export"):
        TimmFolderDataset(str(tmp_path / "nothing")).load()


def test_every_exported_file_is_readable_by_the_group_and_others(tmp_path):
    # safetensors creates model.safetensors 0600; the exported folder is for sharing: 0644 under the usual umask 022
    export = export_trunk(_payload(build_model("resnet18", embedding_dim=8, img_size=32)), parse_export_params({}), "# card\n")
    TimmFolderDataset(str(tmp_path / "exported")).save(export)
    umask = int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("Umask:")), 8)
    modes = {path.name: path.stat().st_mode & 0o777 for path in (tmp_path / "exported").iterdir()}
    assert set(modes) == {"config.json", "model.safetensors", "README.md"}
    assert modes == dict.fromkeys(modes, 0o666 & ~umask)
    assert (tmp_path / "exported").stat().st_mode & 0o777 == 0o777 & ~umask
