"""The frozen probe scores the trunk's features, not the head's output."""

import numpy as np
import torch

from fdsml.data import ImageRecords, RetrievalSplits
from fdsml.evaluation.frozen_probe import frozen_probe
from fdsml.models import build_model


def two_kinds_of_image() -> RetrievalSplits:
    """Class 0: dark left half; class 1: dark right half. Any random conv trunk tells them apart."""
    images = np.full((12, 16, 16), 255, dtype=np.uint8)
    images[:6, :, :8] = 0
    images[6:, :, 8:] = 0
    images += np.random.default_rng(0).integers(0, 3, images.shape, dtype=np.uint8)
    labels = np.repeat([0, 1], 6)
    records = ImageRecords(labels=labels, images=images)
    return RetrievalSplits("toy", records, (1, 2), test=records)


def test_the_probe_reads_the_trunk_so_a_collapsed_head_does_not_matter():
    torch.manual_seed(0)
    model = build_model("resnet18", img_size=16, embedding_dim=8)
    for parameter in model.head.parameters():
        torch.nn.init.zeros_(parameter)  # every embedding is 0: the head alone would retrieve nothing
    model.train()
    metrics = frozen_probe(model, two_kinds_of_image(), image_size=16, crop_fraction=1.0)
    assert metrics["recall@1"] == 1.0
    assert model.training, "the probe leaves the model in the mode it found it in"
