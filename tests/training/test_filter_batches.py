"""Which batches each candidate filter mines in batch mode: the method's filters, not the batch's.

``all`` draws both candidates from anywhere in the dataset and ``diff`` from any two other
classes: mined inside a batch, their candidates must mix classes as the dataset does. Measured
against the whole table's frequencies, a P x K class-balanced batch gives ``all`` candidates of
the anchor's class and ``diff`` pairs from one class several times too often.
"""

import numpy as np
import pytest
import torch

from fdsml.data import ClassBalancedBatchSampler, ShuffledBatchSampler
from fdsml.losses.pa_triplet import allowed_triplets
from fdsml.distributed import DistContext
from fdsml.training.pretrain import build_batch_sampler, plan_pretrain
from tests.training.helpers import tiny_config

N_CLASSES, PER_CLASS, P, K = 40, 30, 8, 5
LABELS = np.repeat(np.arange(N_CLASSES), PER_CLASS)


def _sampler(filter_name, tmp_path):
    config = tiny_config(tmp_path, pa_triplet={"filter": filter_name}, data={"classes_per_batch": P, "instances_per_class": K})
    plan = plan_pretrain(config, len(LABELS), 1)
    return build_batch_sampler(LABELS, config, DistContext(torch.device("cpu")), plan)


def _mined_frequency(filter_name, tmp_path):
    """Over one epoch's batches: how often candidate 1 shares the anchor's class (all), or the two
    candidates share a class (diff)."""
    hits = total = 0
    for batch in _sampler(filter_name, tmp_path):
        labels = torch.from_numpy(LABELS[batch])
        anchors, first, second = allowed_triplets(labels, filter_name)
        if filter_name == "all":
            hits += int((labels[first] == labels[anchors]).sum()) + int((labels[second] == labels[anchors]).sum())
            total += 2 * anchors.shape[0]
        else:
            hits += int((labels[first] == labels[second]).sum())
            total += anchors.shape[0]
    return hits / total


def test_each_and_same_mine_class_balanced_batches(tmp_path):
    for name in ("each", "same"):
        sampler = _sampler(name, tmp_path)
        assert isinstance(sampler, ClassBalancedBatchSampler)
        assert (sampler.classes_per_batch, sampler.instances_per_class) == (P, K)


@pytest.mark.parametrize("filter_name", ["all", "diff"])
def test_all_and_diff_mine_batches_with_the_datasets_class_mix(filter_name, tmp_path):
    n = len(LABELS)
    if filter_name == "all":  # a candidate drawn anywhere (not the anchor) is of the anchor's class
        table = (PER_CLASS - 1) / (n - 1)
        class_balanced = (K - 1) / (P * K - 1)
    else:  # two candidates drawn from the other classes share a class
        others = n - PER_CLASS
        table = (N_CLASSES - 1) * PER_CLASS * (PER_CLASS - 1) / (others * (others - 1))
        class_balanced = (P - 1) * K * (K - 1) / ((P - 1) * K * ((P - 1) * K - 1))
    assert isinstance(_sampler(filter_name, tmp_path), ShuffledBatchSampler)
    measured = _mined_frequency(filter_name, tmp_path)
    assert class_balanced > 4 * table  # what P x K batches would give: far from the table's
    assert measured == pytest.approx(table, rel=0.25), (filter_name, measured, table)
