"""The frozen probe scores the trunk's features, not the head's output."""

import torch

from fdsml.evaluation.frozen_probe import frozen_probe
from fdsml.models import build_model
from tests.support import two_kinds_of_image


def test_the_probe_reads_the_trunk_so_a_collapsed_head_does_not_matter():
    torch.manual_seed(0)
    model = build_model("resnet18", img_size=16, embedding_dim=8)
    for parameter in model.head.parameters():
        torch.nn.init.zeros_(parameter)  # every embedding is 0: the head alone would retrieve nothing
    model.train()
    metrics = frozen_probe(model, two_kinds_of_image(), image_size=16, crop_fraction=1.0)
    assert metrics["recall@1"] == 1.0
    assert model.training, "the probe leaves the model in the mode it found it in"
