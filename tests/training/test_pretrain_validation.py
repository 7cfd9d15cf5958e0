"""Held-out validation inside pre-training: it never changes the training, it sees only held-out rows,
and its ordering agreement rises under PA-Triplet, not under PA-Triplet with its candidates swapped."""

import dataclasses

import numpy as np
import pytest
import torch

from fdsml import native_bf16
from fdsml.config import ConfigError
from fdsml.data.holdout import HoldoutSettings, split_table
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb
from fdsml.training import pretrain as pretrain_module
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective
from fdsml.training.pretrain import pretrain

from tests.support import TINY_FRACTALS, TINY_SPEC
from .helpers import tiny_config

def test_training_is_the_same_byte_for_byte_with_validation_on_or_off(tiny_table, tmp_path):
    """FDSL on 2 of the 3 classes (class 1 held out whole, one instance of each other class too)."""
    split = split_table(tiny_table, HoldoutSettings(instance_fraction=0.2, class_fraction=0.34), seed=0)
    assert split.training_classes.tolist() == [0, 2]  # class 2 is output 1: the classifier's labels are renumbered
    common = dict(objective="fdsl", data={"classes_per_batch": 2}, train={"max_steps": 4, "checkpoint_every": 100})
    off, history_off = pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path / "off", **common), split=split)
    on_config = tiny_config(
        tmp_path / "on", **common, validation={"every": 2, "triplets": 50, "probe": {"image_size": 16, "max_images": 40}}
    )
    on, history_on = pretrain(tiny_table, TINY_SPEC, on_config, split=split)
    assert on["model"]["num_classes"] == 2 and on["metadata"]["training_classes"] == [0, 2]
    assert all(torch.equal(off["state_dict"][k], on["state_dict"][k]) for k in off["state_dict"])
    initialisation, trained = history_on.iloc[0], history_on.iloc[1:]
    assert initialisation["step"] == 0 and np.isnan(initialisation["loss"])  # the untrained model's row, no loss
    assert trained["loss"].tolist() == history_off["loss"].tolist()
    validated = history_on[history_on["validation_s"].notna()]
    assert validated["step"].tolist() == [0, 2, 4]
    assert validated[["val_unseen_region_top1", "val_probe_recall_at_1", "val_unseen_agreement_all", "val_unseen_agreement_each"]].notna().all().all()
    assert validated["val_unseen_class_recall_at_1"].isna().all()  # one held-out class: no retrieval among held-out classes
    assert "validation_s" not in history_off


def test_a_split_leaving_too_few_classes_for_a_batch_names_the_keys(tiny_table, tmp_path):
    split = split_table(tiny_table, HoldoutSettings(class_fraction=0.34), seed=0)
    with pytest.raises(ConfigError, match=r"pretrain\.data\.classes_per_batch: 3, but the training rows have 2 .*fractals\.holdout"):
        pretrain(tiny_table, TINY_SPEC, tiny_config(tmp_path), split=split)


@pytest.mark.parametrize("normalize", [True, False])
def test_the_validation_measures_in_the_distance_the_objective_trains(tiny_table, tmp_path, normalize):
    split = split_table(tiny_table, HoldoutSettings(instance_fraction=0.2, class_fraction=0.34), seed=0)
    config = tiny_config(
        tmp_path, pa_triplet={"filter": "same", "normalize_embeddings": normalize}, validation={"every": 2, "triplets": 10, "probe": None}
    )
    assert pretrain_module.build_validation(config, tiny_table, TINY_SPEC, None, split).normalize is normalize


class SwappedPATriplet(PATripletObjective):
    """PA-Triplet with its positives and negatives swapped: the bug the agreement must expose."""

    def indices(self, labels, psi, step):
        anchors, positives, negatives = super().indices(labels, psi, step)
        return anchors, negatives, positives


LEARNING_TABLE = dataclasses.replace(TINY_FRACTALS, n_classes=3, instances_per_class=16)
LEARNING_SPEC = FamilySpec(FINEFRACTALDB, LEARNING_TABLE)
NOISE = 0.05  # 500 triplets of 24 held-out images move by a few hundredths between equivalent models
FALL = 0.15  # a clear fall (one thread, training seeds 0-3: -0.00 to +0.04 with PA-Triplet, -0.19 to -0.27 swapped)


@pytest.fixture(scope="module")
def learning_table():
    return generate_finefractaldb(LEARNING_TABLE)[0]


def agreement_gain(table, run_dir, monkeypatch, swapped: bool) -> float:
    """Held-out ``each`` agreement after 40 PA-Triplet steps (filter ``each``) minus its value on the same
    initial model.

    Half of every class's instances are held out, one region of its descriptor space: within-class
    ordering on instances no training instance lies near (with ``all`` or ``same``, 40 steps move a
    wrong loss's agreement as much as the right one's: see docs/pa-triplet.md). BatchNorm stays on its initial statistics
    (``freeze_batchnorm``) so both measurements normalise alike: otherwise the running statistics,
    which any training moves, would shift the agreement by themselves.
    """
    split = split_table(table, HoldoutSettings(instance_fraction=0.5), seed=0)
    config = tiny_config(
        run_dir,
        pa_triplet={"filter": "each"},
        data={"classes_per_batch": 3, "instances_per_class": 5},
        optimizer={"base_lr": 1.0},
        train={"max_steps": 40, "checkpoint_every": 100, "log_every": 40, "freeze_batchnorm": True},
        validation={"every": 40, "triplets": 500},
    )
    if swapped:
        monkeypatch.setattr(pretrain_module, "build_objective", lambda c, *sizes: SwappedPATriplet(c.pa_triplet.filter, seed=c.train.seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.train.seed)  # the initial model pretrain builds
        initial = pretrain_module.build_pretrain_model(config, len(split.training_classes), LEARNING_SPEC.size)
    validation = pretrain_module.build_validation(config, table, LEARNING_SPEC, None, split)
    before = validation(initial, step=0)["val_unseen_agreement_each"]
    _, history = pretrain(table, LEARNING_SPEC, config, split=split)
    return history["val_unseen_agreement_each"].iloc[-1] - before


@pytest.fixture(scope="module")
def gains(learning_table, tmp_path_factory):
    """The held-out gain of the right loss and of the loss with positives and negatives swapped, on the suite's
    one torch thread (tests/conftest.py): 40 steps amplify the float sums' order (seed 0 on two threads: +0.04
    and -0.13). The CPU counts as computing bf16 natively, so PA-Triplet trains in the precision it declares for
    such a device: were that bf16, even with a float32 head, the swapped loss would no longer move the ordering
    (docs/cpu.md, precision parity)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(native_bf16, "cpu_has_native_bf16", lambda: True)
        return {
            swapped: agreement_gain(learning_table, tmp_path_factory.mktemp(f"swapped{swapped}"), monkeypatch, swapped)
            for swapped in (False, True)
        }


def test_pa_triplet_keeps_the_held_out_ordering_agreement(gains):
    assert gains[False] >= -NOISE


def test_with_positives_and_negatives_swapped_the_agreement_falls(gains):
    """The same measurement fails when the loss is wrong: the loss alone would still fall."""
    assert gains[True] <= -FALL
