"""Classification fine-tuning: settings, label smoothing, mixup / cutmix, a trunk that starts from its checkpoint."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from fdsml.data import image_records  # its test_view by attribute: a test_ name imported here would be collected
from fdsml.models import build_model, model_payload, save_checkpoint
from fdsml.models.starting_points import StartingPoint, trunk_digest
from fdsml.seeds import step_seed
from fdsml.training.classification import (
    MixupObjective,
    MixupSettings,
    build_classification_objective,
    eval_transform,
    finetune_classifier,
    mix_batch,
    parse_classification_params,
    rate_source,
    run_classification,
    smooth_one_hot,
)

from tests.support import tiny_classification_splits


def test_smooth_one_hot_matches_torch_label_smoothing():
    logits, labels = torch.randn(5, 4), torch.tensor([0, 3, 1, 1, 2])
    targets = smooth_one_hot(labels, 4, 0.2)
    assert smooth_one_hot(torch.tensor([0, 1]), 4, 0.2).shape == (2, 4)  # the classes, not the batch's largest label
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


def test_mixup_objective_is_the_soft_cross_entropy_of_the_batch_its_step_generator_mixed():
    """The step's generator is seeded by (seed, step, rank); the targets are smoothed before they are mixed; the
    accuracy compares the logits' top class with the mixed targets' top class."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 3))
    batch = {"image": torch.rand(4, 3, 4, 4), "label": torch.tensor([0, 1, 2, 0])}
    settings = MixupSettings(mixup_alpha=0.5, cutmix_alpha=1.0)
    loss, logged = MixupObjective(3, settings, label_smoothing=0.1, seed=3)(model, batch, 5)
    rng = np.random.default_rng(step_seed(3, 5, None))
    images, targets = mix_batch(batch["image"], smooth_one_hot(batch["label"], 3, 0.1), settings, rng)
    assert targets.min() > 0  # smoothed: no class at zero
    logits = model(images)
    expected = -(targets * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    accuracy = (logits.argmax(1) == targets.argmax(1)).float().mean().item()
    assert logged["accuracy"].item() == accuracy != (logits.argmax(1) == targets.argmax()).float().mean().item()  # per row
    other = MixupObjective(3, settings, label_smoothing=0.1, seed=4)(model, batch, 5)[0]
    assert other.item() != loss.item()  # the seed is used


def mixed_kinds(settings: MixupSettings, draws: int = 400) -> tuple[int, int, list[float]]:
    """How many of ``draws`` batches (image 0 all zeros, image 1 all ones) were left alone and how many cutmixed, and
    each mixed batch's weight of image 0."""
    images = torch.stack([torch.zeros(1, 8, 8), torch.ones(1, 8, 8)])
    alone, cut, weights = 0, 0, []
    for seed in range(draws):
        mixed, soft = mix_batch(images, torch.eye(2), settings, np.random.default_rng(seed))
        if mixed is images:
            alone += 1
            continue
        cut += bool(((mixed[0] == 0) | (mixed[0] == 1)).all() and 0 < mixed[0].mean() < 1)
        weights.append(soft[0, 0].item())
    return alone, cut, weights


def test_prob_is_the_share_of_batches_mixed_and_switch_prob_the_share_of_those_cutmixed():
    alone, cut, _ = mixed_kinds(MixupSettings(mixup_alpha=1.0, cutmix_alpha=1.0, prob=0.25, switch_prob=0.5))
    assert 0.68 < alone / 400 < 0.82  # 75 % left alone
    assert 0.35 < cut / (400 - alone) < 0.65
    assert mixed_kinds(MixupSettings(mixup_alpha=1.0, cutmix_alpha=1.0, switch_prob=0.0))[:2] == (0, 0)
    _, cut, weights = mixed_kinds(MixupSettings(mixup_alpha=1.0, cutmix_alpha=1.0, switch_prob=1.0))
    assert cut >= 0.9 * len(weights)  # every batch cutmixed (a few boxes clip to nothing)
    assert mixed_kinds(MixupSettings(cutmix_alpha=1.0, switch_prob=0.0))[1] > 300  # cutmix alone ignores switch_prob


def test_each_kind_draws_its_weight_from_its_own_alpha():
    """Beta(100, 100) keeps the weight away from 0 and 1; Beta(0.02, 0.02) pushes it there (a cutmix box of almost no
    area is empty: weight 1)."""
    extreme = lambda weights: np.mean((np.asarray(weights) < 0.01) | (np.asarray(weights) > 0.99))
    for mixup_alpha, cutmix_alpha in ((100.0, 0.02), (0.02, 100.0)):
        mixed = mixed_kinds(MixupSettings(mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha, switch_prob=0.0))[2]
        cut = mixed_kinds(MixupSettings(mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha, switch_prob=1.0))[2]
        assert (extreme(mixed) > 0.3) == (mixup_alpha < 1) and (extreme(cut) > 0.3) == (cutmix_alpha < 1)
        assert extreme(mixed if mixup_alpha > 1 else cut) == 0


def test_each_starts_rate_names_the_key_it_came_from():
    config = parse_classification_params(
        {"starting_points": [{"name": "scratch"}, {"name": "own", "checkpoint": "own.pt", "base_lr": 3e-4}]}
    )
    assert [rate_source(config, start) for start in config.starting_points] == [
        "classification.optimizer.base_lr",
        "classification.starting_points[1].base_lr",
    ]


def test_the_plugins_a_classification_selects_are_its_datasets_readers_each_once_sorted():
    config = parse_classification_params({"datasets": [{"name": "fashion_mnist"}, {"name": "cifar10"}, {"name": "cifar100"}]})
    assert config.plugin_modules() == ("fdsml.data.readers.cifar", "fdsml.data.readers.fashion_mnist")


def test_the_scoring_view_is_the_test_view_at_its_crop_fraction_whatever_the_generator():
    image = torch.randint(0, 256, (3, 20, 28), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    view = lambda crop_fraction, seed: eval_transform(16, crop_fraction)(image, np.random.default_rng(seed))
    for crop_fraction in (0.5, 1.0):
        assert torch.equal(view(crop_fraction, 0), image_records.test_view(image, 16, crop_fraction).float() / 255.0)
        assert torch.equal(view(crop_fraction, 0), view(crop_fraction, 1))
    assert not torch.equal(view(0.5, 0), view(0.875, 0))


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


def test_classification_fine_tunes_every_start_on_every_dataset_at_its_rate_and_records_each(tmp_path):
    """The study's classification step: each start's scores, length, rate and key, and the trunk it began from; the
    models by ``dataset/start``; the histories stacked under one index; each run's final scores live."""
    torch.manual_seed(0)
    pretrained = model_payload(build_model("resnet18", embedding_dim=8, img_size=16), objective="pa_triplet")
    starts = [{"name": "scratch"}, {"name": "fdsml", "checkpoint": "pretrained_model", "base_lr": 3e-4}]
    config = parse_classification_params(
        {"datasets": [{"name": "digits"}], "starting_points": starts, "image_size": 16, "batch_size": 32,
         "train": {"max_steps": 2, "device": "cpu"}, "run_dir": str(tmp_path / "run"), "live_dir": str(tmp_path / "live")}
    )  # fmt: skip
    models, metrics, history = run_classification(config, pretrained)
    assert list(models) == ["digits/scratch", "digits/fdsml"] and list(metrics) == ["digits"]
    rates = {"scratch": (config.optimizer.base_lr, "classification.optimizer.base_lr"), "fdsml": (3e-4, "classification.starting_points[1].base_lr")}
    for name, entry in metrics["digits"].items():
        assert (entry["rate"]["base_lr"], entry["rate"]["source"]) == rates[name]
        assert entry["steps"] == models[f"digits/{name}"]["metadata"]["steps"] == 2
        assert 0 <= entry["top1"] <= entry["top5"] <= 1
    assert (metrics["digits"]["fdsml"]["checkpoint"], metrics["digits"]["fdsml"]["trunk_digest"]) == ("pretrained_model", trunk_digest(pretrained))
    assert metrics["digits"]["scratch"]["trunk_digest"] == ""
    assert history.index.tolist() == list(range(len(history))) and len(history) >= 4  # two runs' rows, one index
    live = json.loads((tmp_path / "live" / "metrics.json").read_text())
    assert live["digits"]["fdsml"]["top1"] == pytest.approx(metrics["digits"]["fdsml"]["top1"])
    for name in ("scratch", "fdsml"):  # each run's rows, under its own folder
        assert (tmp_path / "live" / "plots" / "metrics" / "digits" / name / "loss.tsv").is_file()


def test_mixing_fine_tunes_with_the_soft_target_objective_of_its_settings():
    config = parse_classification_params({"mixup": {"cutmix_alpha": 1.0}, "label_smoothing": 0.1, "train": {"seed": 7}})
    objective = build_classification_objective(config, 5)
    assert isinstance(objective, MixupObjective)
    assert (objective.num_classes, objective.settings, objective.label_smoothing, objective.seed) == (5, config.mixup, 0.1, 7)


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
    payload, history = finetune_classifier(tiny_classification_splits(), StartingPoint("pre", str(tmp_path / "pre.pt")), config)
    assert payload["model"]["head"] == "classifier" and payload["model"]["num_classes"] == 3
    assert payload["metadata"] | {"run_fingerprint": None} == {
        "dataset": "tiny", "start": "pre", "start_checkpoint": str(tmp_path / "pre.pt"),
        "start_trunk_digest": trunk_digest(saved), "num_classes": 3, "image_size": 16, "crop_fraction": 0.875, "steps": 2, "run_fingerprint": None,
    }  # fmt: skip
    assert re.fullmatch("[0-9a-f]{64}", payload["metadata"]["run_fingerprint"])  # the run it came from, for the model card
    # a vanishing learning rate leaves the trunk's weights where the checkpoint put them
    for name, tensor in pretrained.backbone.state_dict().items():
        if name.endswith("weight") and tensor.ndim == 4:
            torch.testing.assert_close(payload["state_dict"][f"backbone.{name}"], tensor, rtol=0, atol=1e-6)
    assert history["step"].tolist() == [1, 2] and (set(history["dataset"]), set(history["start"])) == ({"tiny"}, {"pre"})
