import pytest
import torch

from fdsml.models import build_model, model_payload, save_checkpoint
from fdsml.models.starting_points import StartingPoint, build_from_start


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
    with pytest.raises(ValueError, match="holds a resnet18 backbone, but backbone: resnet50 was asked for"):
        build_from_start(StartingPoint("fdsl", str(path), "resnet50"), seed=0, embedding_dim=8)


def test_a_missing_checkpoint_names_the_pipeline_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="kedro run --pipelines=pretrain"):
        build_from_start(StartingPoint("fdsml", str(tmp_path / "none.pt")), seed=0, embedding_dim=8)
