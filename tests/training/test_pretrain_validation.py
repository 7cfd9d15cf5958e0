"""Held-out validation inside pre-training: it never changes the training, it sees only held-out rows,
and its ordering agreement rises under PA-Triplet, not under PA-Triplet with its candidates swapped."""

import numpy as np
import pytest
import torch

from fdsml.config import ConfigError
from fdsml.data.holdout import HoldoutSettings, split_table
from fdsml.training import pretrain as pretrain_module
from fdsml.training.objectives import PATripletObjective
from fdsml.training.pretrain import pretrain

from .conftest import TINY_FRACTALS
from .helpers import tiny_config

RENDER = TINY_FRACTALS.render


def test_training_is_the_same_byte_for_byte_with_validation_on_or_off(tiny_table, tmp_path):
    """FDSL on 2 of the 3 classes (class 1 held out whole, one instance of each other class too)."""
    split = split_table(tiny_table, HoldoutSettings(instance_fraction=0.2, class_fraction=0.34), seed=0)
    assert split.training_classes.tolist() == [0, 2]  # class 2 is output 1: the classifier's labels are renumbered
    common = dict(objective="fdsl", data={"classes_per_batch": 2}, train={"max_steps": 4, "checkpoint_every": 100})
    off, history_off = pretrain(tiny_table, RENDER, tiny_config(tmp_path / "off", **common), split=split)
    on_config = tiny_config(
        tmp_path / "on", **common, validation={"every": 2, "triplets": 50, "probe": {"image_size": 16, "max_images": 40}}
    )
    on, history_on = pretrain(tiny_table, RENDER, on_config, split=split)
    assert on["model"]["num_classes"] == 2 and on["metadata"]["training_classes"] == [0, 2]
    assert all(torch.equal(off["state_dict"][k], on["state_dict"][k]) for k in off["state_dict"])
    assert history_on["loss"].tolist() == history_off["loss"].tolist()
    validated = history_on[history_on["validation_s"].notna()]
    assert validated["step"].tolist() == [2, 4]
    assert validated[["val_top1", "val_probe_recall_at_1", "val_agreement_all", "val_agreement_each"]].notna().all().all()
    assert validated["val_class_recall_at_1"].isna().all()  # one held-out class: no retrieval among held-out classes
    assert "validation_s" not in history_off


def test_a_split_leaving_too_few_classes_for_a_batch_names_the_keys(tiny_table, tmp_path):
    split = split_table(tiny_table, HoldoutSettings(class_fraction=0.34), seed=0)
    with pytest.raises(ConfigError, match=r"pretrain\.data\.classes_per_batch: 3, but the training rows have 2 .*fractals\.holdout"):
        pretrain(tiny_table, RENDER, tiny_config(tmp_path), split=split)
