"""The pretrain pipeline end to end on a tiny configuration, through a real catalog."""

import pandas as pd
import torch
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner

from fdsml import reuse
from fdsml.models import load_checkpoint
from fdsml.pipelines.pretrain import create_pipeline

from .catalogs import pretrain_datasets

FRACTALS = {
    "seed": 2,
    "n_classes": 3,
    "instances_per_class": 6,
    "class_filter": {"size": 96, "points": 4000},
    "render": {"size": 32, "points": 600},
    "outputs": {"materialize": True, "shard_size": 10},
    "holdout": {"instance_fraction": 0.2, "class_fraction": 0.0},  # one instance of each class
}
PRETRAIN = {
    "pa_triplet": {"filter": "each"},
    "model": {"backbone": "resnet18", "embedding_dim": 8},
    "data": {"source": "shards", "classes_per_batch": 3, "instances_per_class": 2},
    "train": {"max_steps": 3, "device": "cpu", "checkpoint_every": 2},
    "validation": {"every": 2, "triplets": 20},
}


def test_pipeline_trains_from_materialised_shards_and_saves_a_loadable_model(tmp_path):
    """On the training rows of the shards; the held-out instances are validated at initialisation and at steps 2 and 3."""
    catalog = DataCatalog(pretrain_datasets(tmp_path, FRACTALS, PRETRAIN))
    SequentialRunner().run(create_pipeline(), catalog)
    history = pd.read_csv(tmp_path / "history.csv")
    assert history["step"].tolist() == [0, 1, 2, 3] and history["loss"].notna().tolist() == [False, True, True, True]
    assert history["val_unseen_agreement_all"].notna().tolist() == [True, False, True, True]
    model, payload = load_checkpoint(tmp_path / "model.pt")
    assert payload["metadata"]["filter"] == "each" and payload["metadata"]["steps"] == 3
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 8)


def test_the_codes_tables_content_digest_is_computed_once_per_run(tmp_path, monkeypatch):
    """Generation records it in the summary; the shards' and the training run's fingerprints read it there."""
    digested, original = [], reuse.content_digest

    def counting(artefact):
        if isinstance(artefact, pd.DataFrame):
            digested.append(len(artefact))
        return original(artefact)

    monkeypatch.setattr(reuse, "content_digest", counting)
    quick = PRETRAIN | {"train": PRETRAIN["train"] | {"max_steps": 1}, "validation": {"every": 0}}
    SequentialRunner().run(create_pipeline(), DataCatalog(pretrain_datasets(tmp_path, FRACTALS, quick)))
    assert digested == [18]
