"""The frozen probe scores the trunk's features, not the head's output."""

import pytest
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


class _MeanColour(torch.nn.Module):
    """A 'trunk' whose features are each image's mean colour: which view it was shown, read off its output."""

    def features(self, images):
        return images.mean(dim=(2, 3))


def test_the_probe_scores_the_trunks_features_of_the_test_view_at_its_crop_at_the_callers_seed():
    import numpy as np

    from fdsml.data import ImageRecords, RetrievalSplits, image_records
    from fdsml.evaluation.retrieval import retrieval_scores

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(12, 24, 24, 3), dtype=np.uint8)
    records = ImageRecords(labels=np.arange(12) % 4, images=images)
    splits = RetrievalSplits("toy", records, (1, 2), test=records)
    view = lambda crop: np.stack([image_records.test_view(torch.from_numpy(i).permute(2, 0, 1), 16, crop).float().mean(dim=(1, 2)).numpy() / 255 for i in images])
    model = _MeanColour().eval()
    for crop in (0.5, 0.875):
        expected = retrieval_scores(view(crop), records.labels, ks=(1, 2), seed=5)[0]
        found = frozen_probe(model, splits, 16, crop_fraction=crop, seed=5, batch_size=5)
        assert found == pytest.approx(expected, abs=1e-6)
    assert frozen_probe(model, splits, 16, seed=5) == found  # the default crop is the test view's 0.875
    assert not model.training


def test_the_probe_embeds_in_the_batches_on_the_device_and_with_the_loader_processes_asked(monkeypatch):
    """Each split the probe embeds goes through the embedding loop with the caller's batch, device and loader
    processes (the batch bounds memory; here the loop itself runs on the CPU in the main process)."""
    from fdsml.evaluation import embedding, frozen_probe as probe_module

    asked = []

    def outputs(model, dataset, *, batch_size, device, workers):
        asked.append((batch_size, device, workers))
        return embedding.model_outputs(model, dataset, batch_size=batch_size)

    monkeypatch.setattr(probe_module, "model_outputs", outputs)
    torch.manual_seed(0)
    model = build_model("resnet18", img_size=16, embedding_dim=8)
    frozen_probe(model, two_kinds_of_image(), image_size=16, crop_fraction=1.0, batch_size=3, device="cuda", workers=2)
    assert asked and set(asked) == {(3, "cuda", 2)}
