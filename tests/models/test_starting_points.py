import pytest
import torch
import yaml

from fdsml.config import ConfigError
from fdsml.models import build_model, model_payload, save_checkpoint
from fdsml.models.starting_points import StartingPoint, build_from_start, check_start_settings
from fdsml.training.classification import parse_classification_params
from fdsml.training.retrieval import parse_retrieval_params
from tests.support import ROOT


@pytest.fixture(scope="module")
def fdsl_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "fdsl.pt"
    torch.manual_seed(0)
    model = build_model("resnet18", head="classifier", num_classes=5, img_size=32)
    save_checkpoint(path, model_payload(model, objective="fdsl"))
    return path, model


def test_checkpoint_trunk_is_loaded_under_a_new_head(fdsl_checkpoint):
    path, pretrained = fdsl_checkpoint
    model = build_from_start(StartingPoint("fdsl", str(path), "resnet18"), seed=1, embedding_dim=16)
    assert model.spec.head == "embedding" and model.output_dim == 16
    for name, tensor in pretrained.backbone.state_dict().items():
        torch.testing.assert_close(model.backbone.state_dict()[name], tensor, rtol=0, atol=0)


def test_scratch_is_seeded(fdsl_checkpoint):
    first = build_from_start(StartingPoint("scratch"), seed=3, embedding_dim=8)
    second = build_from_start(StartingPoint("scratch"), seed=3, embedding_dim=8)
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_scratch_starts_differ_by_seed_head_and_trunk_alike():
    first = build_from_start(StartingPoint("scratch"), seed=3, embedding_dim=8)
    second = build_from_start(StartingPoint("scratch"), seed=4, embedding_dim=8)
    for part in ("backbone", "head"):
        weights = [(a, b) for a, b in zip(getattr(first, part).parameters(), getattr(second, part).parameters()) if a.ndim > 1]
        assert weights and all(not torch.equal(a, b) for a, b in weights), part


def test_a_checkpoint_start_differs_by_seed_only_in_its_fresh_head(fdsl_checkpoint):
    path, _ = fdsl_checkpoint
    first, second = (build_from_start(StartingPoint("fdsl", str(path)), seed=s, embedding_dim=8) for s in (3, 4))
    assert all(torch.equal(a, b) for a, b in zip(first.backbone.parameters(), second.backbone.parameters()))
    assert not torch.equal(first.head.weight, second.head.weight)


def test_a_checkpoint_of_another_backbone_is_refused(fdsl_checkpoint):
    path, _ = fdsl_checkpoint
    with pytest.raises(ValueError, match=rf"{path} holds a resnet18 backbone, but backbone: resnet50 was asked for"):
        build_from_start(StartingPoint("fdsl", str(path), "resnet50"), seed=0, embedding_dim=8)


def test_a_missing_checkpoint_names_the_pipeline_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="kedro run --pipelines=pretrain"):
        build_from_start(StartingPoint("fdsml", str(tmp_path / "none.pt")), seed=0, embedding_dim=8)


@pytest.mark.parametrize(
    "parse, section, key", [(parse_retrieval_params, "retrieval", "starts"), (parse_classification_params, "classification", "starting_points")]
)
def test_a_start_whose_name_would_leave_its_run_folder_is_refused(parse, section, key):
    """A start's name names its run folders (``<dataset>/<start>_seed<seed>``): ``../..`` would write elsewhere."""
    params = yaml.safe_load((ROOT / f"conf/base/parameters_{section}.yml").read_text())[section]
    with pytest.raises(ConfigError, match=r"starting point name: '../../elsewhere' names files and folders and must stay inside"):
        parse(params | {key: [{"name": "../../elsewhere"}]})


def test_the_pretrained_start_needs_the_pipelines_model_file():
    from fdsml.models.starting_points import PRETRAINED, start_payload

    start = StartingPoint("fdsml", PRETRAINED)
    with pytest.raises(ValueError, match=r"'fdsml': checkpoint pretrained_model .* run `kedro run --pipelines=pretrain` first"):
        start_payload(start)
    with pytest.raises(ValueError, match=r"pass its model file, or run `kedro run --pipelines=pretrain` first$"):
        start_payload(start)
    payload = {"state_dict": {}}
    assert start_payload(start, payload) is payload and start_payload(StartingPoint("scratch")) is None


def test_the_trunk_digest_is_the_trunks_content_and_empty_from_scratch(fdsl_checkpoint):
    from fdsml.fingerprints import content_digest
    from fdsml.models.checkpoint import load_checkpoint_file
    from fdsml.models.starting_points import start_record, trunk_digest, trunk_state_dict

    payload = load_checkpoint_file(fdsl_checkpoint[0])
    assert trunk_digest(None) == ""
    assert trunk_digest(payload) == content_digest(trunk_state_dict(payload)) != content_digest(payload["state_dict"])
    assert start_record("fdsml", payload) == {"checkpoint": "fdsml", "trunk_digest": trunk_digest(payload)}
    assert start_record(None, None) == {"checkpoint": None, "trunk_digest": ""}


def test_a_start_names_the_key_of_a_wrong_rate_backbone_or_override():
    with pytest.raises(ConfigError, match=r"^base_lr: must be a positive learning rate .*got 0$"):
        StartingPoint("scratch", base_lr=0)
    with pytest.raises(ConfigError, match=r"starts\[1\]\.backbone"):
        check_start_settings((StartingPoint("scratch"), StartingPoint("other", backbone="resnet_none")), "starts")
    with pytest.raises(ConfigError, match=r"starts\[0\]\.overrides"):
        check_start_settings((StartingPoint("scratch", overrides={"no_such_option": 1}),), "starts")


def test_a_checkpoint_start_keeps_its_image_size_and_normalisation_unless_told(tmp_path):
    torch.manual_seed(0)
    model = build_model("resnet18", embedding_dim=4, img_size=48, input_mean=(0.5, 0.5, 0.5), input_std=(0.25, 0.25, 0.25))
    save_checkpoint(tmp_path / "m.pt", model_payload(model))
    start = StartingPoint("m", str(tmp_path / "m.pt"))
    kept = build_from_start(start, seed=0, embedding_dim=4)
    assert kept.spec.img_size == 48 and tuple(kept.spec.input_mean) == (0.5, 0.5, 0.5) and tuple(kept.spec.input_std) == (0.25, 0.25, 0.25)
    assert build_from_start(start, seed=0, img_size=32, embedding_dim=4).spec.img_size == 32
    assert build_from_start(StartingPoint("scratch"), seed=0, img_size=40, embedding_dim=4).spec.img_size == 40
