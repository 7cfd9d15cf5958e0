"""Top-k accuracy by hand, and error per corrupted set."""

import numpy as np
import pytest
import torch
from torch import nn

from fdsml.data import ImageRecords, ImageRecordsDataset, ImageTransform
from fdsml.evaluation.classification import classification_scores, robustness_errors, topk_accuracy


def test_topk_accuracy_by_hand():
    logits = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.1, 0.05], [0.2, 0.3, 0.5], [0.0, 0.6, 0.4]])
    labels = torch.tensor([1, 2, 0, 2])
    # ranks of the labels: 1st, 3rd, 3rd, 2nd
    assert topk_accuracy(logits, labels, (1, 2, 3, 5)) == {1: 0.25, 2: 0.5, 3: 1.0, 5: 1.0}


def test_topk_accuracy_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="need logits"):
        topk_accuracy(torch.zeros(3, 4), torch.zeros(2, dtype=torch.long))


class Brightness(nn.Module):
    """Predicts class 1 for bright images, 0 for dark ones."""

    def forward(self, x):
        mean = x.mean(dim=(1, 2, 3))
        return torch.stack([-mean, mean], dim=1)


def test_robustness_errors_score_each_set():
    bright = np.full((4, 32, 32, 3), 250, np.uint8)
    sets = {
        ("brightness", 1): ImageRecords(labels=np.array([1, 1, 1, 1]), images=bright),
        ("contrast", 1): ImageRecords(labels=np.array([1, 0, 0, 0]), images=bright),
    }
    errors = robustness_errors(Brightness(), sets, ImageTransform(32, crop_fraction=1.0), batch_size=3)
    assert errors == {("brightness", 1): 0.0, ("contrast", 1): 0.75}


def test_classification_scores_mark_each_images_top1_hit_in_order():
    """Brightness puts every image in class 1 (its logits are -mean, mean): the images labelled 1 are the hits. The
    brightest image is not the first, so a hit read off the largest logit of the whole batch would differ."""
    images = np.stack([np.full((32, 32, 3), value, np.uint8) for value in (40, 250, 5, 120)])
    dataset = ImageRecordsDataset(ImageRecords(labels=np.array([0, 1, 1, 1]), images=images), ImageTransform(32, crop_fraction=1.0))
    scores, hits = classification_scores(Brightness(), dataset, batch_size=3)
    assert hits.tolist() == [False, True, True, True] and scores == {"top1": 0.75, "top5": 1.0}


def test_every_score_embeds_in_the_batches_on_the_device_and_with_the_loader_processes_asked(monkeypatch):
    """The batch bounds memory, the device and the loader processes the speed: each scorer passes them on as given."""
    from fdsml.evaluation import classification

    asked = []

    def outputs(model, dataset, **settings):
        asked.append(settings)
        return torch.tensor([[0.0, 1.0], [1.0, 0.0]]), torch.tensor([1, 1])

    monkeypatch.setattr(classification, "model_outputs", outputs)
    settings = {"batch_size": 3, "device": "cuda", "workers": 2}
    sets = {("fog", 1): ImageRecords(labels=np.array([1, 1]), images=np.zeros((2, 32, 32, 3), np.uint8))}
    assert classification.classification_metrics(Brightness(), [0, 1], **settings) == {"top1": 0.5, "top5": 1.0}
    assert robustness_errors(Brightness(), sets, ImageTransform(32), **settings) == {("fog", 1): 0.5}
    assert asked == [settings, settings]


def test_top1_and_top5_by_default_over_more_than_five_classes_and_the_refusals_in_full():
    logits = torch.arange(7.0).repeat(3, 1)  # every row ranks class 6 first, class 0 last
    labels = torch.tensor([6, 2, 1])  # ranks 1st, 5th and 6th
    assert topk_accuracy(logits, labels) == {1: pytest.approx(1 / 3), 5: pytest.approx(2 / 3)}
    with pytest.raises(ValueError, match=r"^need logits \(N, C\) and labels \(N,\), got \(3, 4\) and \(2,\)$"):
        topk_accuracy(torch.zeros(3, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="^no images to score$"):
        topk_accuracy(torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))


def test_the_metrics_are_the_scores_without_the_hits():
    from fdsml.evaluation.classification import classification_metrics

    images = np.stack([np.full((32, 32, 3), value, np.uint8) for value in (250, 40)])
    dataset = ImageRecordsDataset(ImageRecords(labels=np.array([1, 1]), images=images), ImageTransform(32, crop_fraction=1.0))
    assert classification_metrics(Brightness(), dataset, batch_size=1) == {"top1": 1.0, "top5": 1.0}
