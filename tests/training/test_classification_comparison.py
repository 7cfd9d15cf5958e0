"""The classification comparison: nearest-centroid baselines on the same test images, each start at its own rate,
and a dataset too small for the rate search refused before any work."""

import numpy as np
import pytest
import torch

from fdsml.config import ConfigError
from fdsml.data.classification_datasets import read_classification_dataset
from fdsml.evaluation.baselines import class_sums, nearest_centroid_scores
from fdsml.evaluation.frozen_probe import trunk_features
from fdsml.models import build_model, model_payload
from fdsml.models.starting_points import StartingPoint, build_from_start
from fdsml.pipelines.run_checks import RunCheckError, check_run
from fdsml.training.classification import eval_transform, parse_classification_params
from fdsml.training.classification_comparison import check_recipe_fits, classification_comparison, comparison_table

from tests.own_images import write_image_folder

TINY = {
    "datasets": [{"name": "digits"}],
    "starting_points": [{"name": "scratch"}, {"name": "fdsml", "checkpoint": "pretrained_model"}],
    "image_size": 32,
    "batch_size": 32,
    "train": {"max_steps": 2, "device": "cpu"},
}


@pytest.fixture(scope="module")
def pretrained():
    torch.manual_seed(5)  # a trunk unlike the scratch start's seed-0 initialisation
    return model_payload(build_model("resnet18", embedding_dim=8, img_size=32), objective="pa_triplet")


@pytest.mark.slow  # every start fine-tuned with its baselines
def test_each_start_is_read_beside_nearest_centroids_on_pixels_and_on_its_frozen_trunk(tmp_path, pretrained, caplog):
    rates = {"rates": [3e-4, 3e-3], "validation_fraction": 0.1}
    config = parse_classification_params(TINY | {"run_dir": str(tmp_path / "run"), "rate_search": rates})
    with caplog.at_level("INFO"):
        _, metrics, _ = classification_comparison(config, pretrained)
    splits = read_classification_dataset("digits", None, seed=0)
    view = eval_transform(32, config.augment.crop_fraction)
    trunk = build_from_start(StartingPoint("fdsml", "pretrained_model"), payload=pretrained, seed=0, img_size=32)
    features = lambda records: trunk_features(trunk, records, view)  # noqa: E731
    by_hand, _ = nearest_centroid_scores(class_sums(features, splits.train, 10), features(splits.test), splits.test.labels)
    held = sum(round(0.1 * count) for count in np.bincount(splits.train.labels))  # a tenth of each digit's training images
    fdsml = metrics["digits"]["fdsml"]
    assert fdsml["baselines"]["its frozen trunk"] == pytest.approx(by_hand)  # the trunk fine-tuning started from
    assert fdsml["baselines"]["raw pixels"]["top1"] > 0.8  # digits' pixels nearly classify themselves
    for name, result in metrics["digits"].items():
        for baseline, found in result["versus"].items():
            assert found["difference"] == pytest.approx(result["top1"] - result["baselines"][baseline]["top1"])
        search = result["rate"]["search"]
        assert result["rate"]["source"] == "chosen on validation" and result["rate"]["base_lr"] == search["chosen"]
        assert search["validation"] == f"{held:,} images held out of the training classes, {len(splits.train) - held:,} left to train on"
        assert result["verdict"].startswith(f"fine-tuning did not help: {name} on digits fine-tuned reaches top-1")
        assert result["verdict"] in caplog.text
    said = "Classification on digits: budget: 2 steps (classification.train.max_steps)"
    assert said in caplog.text and caplog.text.index(said) < caplog.text.index("Training on")  # what will run, before it runs
    table = comparison_table(metrics)
    assert "| raw pixels (nearest centroid) | |" in table and "| fdsml, frozen trunk (nearest centroid) | |" in table
    assert "1 seed, no spread measured" in table and f"Rates chosen on validation (top1, %, on {held:,} images" in table
    searched = sorted(p.parent.name for p in (tmp_path / "run" / "digits" / "rate_search").glob("*/last.pt"))
    assert searched == ["fdsml_lr0.0003", "fdsml_lr0.003", "scratch_lr0.0003", "scratch_lr0.003"]


def test_a_rate_search_that_cannot_hold_an_image_out_of_any_class_stops_before_work(tmp_path):
    root = tmp_path / "pets"
    write_image_folder(root / "train", classes=3, per_class=1)
    write_image_folder(root / "test", classes=3, per_class=1, seed=1)
    params = TINY | {"datasets": [{"name": "imagefolder", "root": str(root)}], "batch_size": 2, "rate_search": {"rates": [1e-3, 3e-3]}}
    config = parse_classification_params(params)
    with pytest.raises(ConfigError, match=r"classification.rate_search \(imagefolder\): no training class has two images"):
        check_recipe_fits(config, {"imagefolder": read_classification_dataset("imagefolder", root, seed=0)}, 1)
    with pytest.raises(RunCheckError, match="no training class has two images"):
        check_run({"classification": params}, reads={"classification"})
