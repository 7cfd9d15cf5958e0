"""Classification fine-tuning: settings, label smoothing, mixup / cutmix, a trunk that starts from its checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fdsml.config import ConfigError
from fdsml.data import ImageRecords
from fdsml.data.classification_datasets import ClassificationSplits
from fdsml.models import build_model, model_payload, save_checkpoint
from fdsml.models.starting_points import StartingPoint, trunk_digest
from fdsml.training.classification import (
    MixupObjective,
    MixupSettings,
    finetune_classifier,
    mix_batch,
    parse_classification_params,
    run_classification,
    smooth_one_hot,
)


def test_smooth_one_hot_matches_torch_label_smoothing():
    logits, labels = torch.randn(5, 4), torch.tensor([0, 3, 1, 1, 2])
    targets = smooth_one_hot(labels, 4, 0.2)
    assert torch.allclose(targets.sum(dim=1), torch.ones(5)) and targets[0].tolist() == pytest.approx([0.85, 0.05, 0.05, 0.05])
    soft = torch.sum(-targets * torch.log_softmax(logits, dim=1), dim=1).mean()
    assert soft.item() == pytest.approx(torch.nn.functional.cross_entropy(logits, labels, label_smoothing=0.2).item(), rel=1e-6)


def test_mixup_blends_images_and_targets_with_the_same_weight():
    images = torch.stack([torch.zeros(3, 4, 4), torch.ones(3, 4, 4)])
    targets = torch.eye(2)
    mixed, soft = mix_batch(images, targets, MixupSettings(mixup_alpha=1.0), np.random.default_rng(0))
    lam = soft[0, 0].item()
    assert 0 < lam < 1
    assert torch.allclose(mixed[0], torch.full((3, 4, 4), 1 - lam)) and torch.allclose(mixed[1], torch.full((3, 4, 4), lam))
    assert torch.allclose(soft[1], torch.tensor([1 - lam, lam]))


def test_cutmix_weighs_targets_by_the_visible_area():
    images = torch.stack([torch.zeros(3, 16, 16), torch.ones(3, 16, 16)])
    for seed in range(20):
        mixed, soft = mix_batch(images, torch.eye(2), MixupSettings(cutmix_alpha=1.0), np.random.default_rng(seed))
        pasted = mixed[0, 0].mean().item()  # the fraction of image 0 covered by image 1
        assert soft[0].tolist() == pytest.approx([1 - pasted, pasted])
        assert torch.equal(mixed[1], 1 - mixed[0])  # the same box, the other way round


def test_cutmix_pastes_a_box_of_the_images_proportions_from_the_reversed_batch():
    """Image i takes its box from image B-1-i; an unclipped box has the image's proportions (to rounding: its sides are
    even pixel counts), and each target weighs its image's visible share."""
    images = torch.arange(3.0)[:, None, None, None].expand(3, 1, 64, 256).clone()
    targets = torch.nn.functional.one_hot(torch.tensor([0, 0, 2]), 3).float()
    interior = 0
    for seed in range(300):
        mixed, soft = mix_batch(images, targets, MixupSettings(cutmix_alpha=1.0), np.random.default_rng(seed))
        box = mixed[0, 0] == 2.0  # image 0's pixels taken from image 2
        assert torch.equal(mixed[2, 0] == 0.0, box) and torch.equal(mixed[1], images[1])  # the middle image pairs itself
        lam = 1.0 - box.float().mean().item()
        torch.testing.assert_close(soft, lam * targets + (1.0 - lam) * targets.flip(0))
        rows, cols = box.any(1).nonzero().flatten(), box.any(0).nonzero().flatten()
        if rows.numel() and 0 < rows[0] and rows[-1] < 63 and 0 < cols[0] and cols[-1] < 255:
            interior += 1
            assert abs(rows.numel() / 64 - cols.numel() / 256) <= 3 / 64
    assert interior > 20


def test_mixing_is_off_by_default_and_for_prob_zero():
    images, targets = torch.rand(2, 3, 4, 4), torch.eye(2)
    for settings in (MixupSettings(), MixupSettings(mixup_alpha=1.0, prob=0.0)):
        assert mix_batch(images, targets, settings, np.random.default_rng(0)) == (images, targets)


def test_mixup_objective_is_reproducible_per_step():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 3))
    batch = {"image": torch.rand(4, 3, 4, 4), "label": torch.tensor([0, 1, 2, 0])}
    objective = MixupObjective(3, MixupSettings(mixup_alpha=0.5, cutmix_alpha=1.0), label_smoothing=0.1, seed=3)
    assert objective(model, batch, 5)[0].item() == objective(model, batch, 5)[0].item()
    assert objective(model, batch, 5)[0].item() != objective(model, batch, 6)[0].item()


def test_settings_name_the_wrong_key():
    with pytest.raises(ConfigError, match="classification.datasets\\[0\\].name: unknown dataset 'mnist'"):
        parse_classification_params({"datasets": [{"name": "mnist"}]})
    with pytest.raises(ConfigError, match="starting_points: names must be unique"):
        parse_classification_params({"starting_points": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(ConfigError, match="mixup.prob: must lie in"):
        parse_classification_params({"mixup": {"prob": 2.0}})


def test_a_missing_checkpoint_fails_before_training(tmp_path):
    config = parse_classification_params(
        {
            "starting_points": [{"name": "scratch"}, {"name": "fdsml", "checkpoint": str(tmp_path / "none.pt")}],
            "run_dir": str(tmp_path),
        }
    )
    with pytest.raises(FileNotFoundError, match="'fdsml'.*kedro run --pipelines=pretrain"):
        run_classification(config)
    assert not any(tmp_path.iterdir())  # nothing trained


def tiny_splits() -> ClassificationSplits:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(12, 16, 16, 3), dtype=np.uint8)
    labels = np.arange(12) % 3
    train, test = ImageRecords(labels=labels, images=images), ImageRecords(labels=labels[:6], images=images[:6])
    return ClassificationSplits("tiny", train, test, 3)


def test_finetuning_starts_from_the_checkpoint_trunk_under_a_fresh_classifier(tmp_path):
    torch.manual_seed(0)
    pretrained = build_model("resnet18", embedding_dim=8, img_size=16)
    saved = model_payload(pretrained, objective="pa_triplet")
    save_checkpoint(tmp_path / "pre.pt", saved)
    config = parse_classification_params(
        {
            "image_size": 16,
            "batch_size": 4,
            "optimizer": {"base_lr": 1e-12, "weight_decay": 0.0},
            "train": {"max_steps": 2, "device": "cpu"},
            "run_dir": str(tmp_path / "run"),
        }
    )
    payload, history = finetune_classifier(tiny_splits(), StartingPoint("pre", str(tmp_path / "pre.pt")), config)
    assert payload["model"]["head"] == "classifier" and payload["model"]["num_classes"] == 3
    assert payload["metadata"] | {"run_fingerprint": None} == {
        "dataset": "tiny", "start": "pre", "start_checkpoint": str(tmp_path / "pre.pt"),
        "start_trunk_digest": trunk_digest(saved), "num_classes": 3, "image_size": 16, "crop_fraction": 0.875, "steps": 2, "run_fingerprint": None,
    }  # fmt: skip
    # a vanishing learning rate leaves the trunk's weights where the checkpoint put them
    for name, tensor in pretrained.backbone.state_dict().items():
        if name.endswith("weight") and tensor.ndim == 4:
            torch.testing.assert_close(payload["state_dict"][f"backbone.{name}"], tensor, rtol=0, atol=1e-6)
    assert history["step"].tolist() == [1, 2] and set(history["start"]) == {"pre"}
