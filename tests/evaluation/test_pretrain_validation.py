"""Held-out validation: the ordering agreement by hand, and a call that leaves the model and the RNG as they were."""

import numpy as np
import pandas as pd
import torch

from fdsml.data import fractal_input
from fdsml.data.holdout import HoldoutSettings, split_table
from fdsml.evaluation.pretrain_validation import METRICS, HeldoutTriplets, PretrainValidation, ordering_agreement
from fdsml.training.pretrain import ValidationSettings
from fdsml.models import build_model
from fdsml.training.loop import freeze_batchnorm


def test_ordering_agreement_by_hand():
    # unit directions: 0 at 0 degrees, 1 at ~6 degrees, 2 at 90 degrees, 3 at 180 degrees (lengths do not matter)
    vectors = torch.tensor([[1.0, 0.0], [10.0, 1.0], [0.0, 3.0], [-0.5, 0.0]])
    triplets = HeldoutTriplets(
        anchors=np.array([0, 0, 1]),
        first=np.array([1, 2, 3]),
        second=np.array([2, 3, 2]),
        descriptor_first=np.array([True, False, False]),
    )
    # by the vectors candidate 1 is nearer in (0, 1, 2) and (0, 2, 3), farther in (1, 3, 2):
    # the descriptor agrees with the first and the third
    assert ordering_agreement(vectors, triplets) == 2 / 3


def test_triplets_are_ordered_by_the_descriptor_distance():
    class_ids = np.array([0, 0, 0, 1, 1, 1])
    psi = np.array([[0.0], [1.0], [5.0], [20.0], [21.0], [30.0]]) * np.ones((1, 6))
    triplets = HeldoutTriplets.draw(class_ids, psi, "same", 50, np.random.default_rng(0))
    near = np.linalg.norm(psi[triplets.anchors] - psi[triplets.first], axis=1) <= np.linalg.norm(
        psi[triplets.anchors] - psi[triplets.second], axis=1
    )
    assert np.array_equal(triplets.descriptor_first, near) and near.any() and not near.all()
    assert (class_ids[triplets.first] == class_ids[triplets.anchors]).all()
    assert HeldoutTriplets.draw(class_ids[:2], psi[:2], "diff", 5, np.random.default_rng(0)) is None  # one class only


class _Renderings:
    """A formula-family-like dataset by table row: uint8 renderings of a class-dependent bar plus noise."""

    def __init__(self, table):
        self.labels = table["class_id"].to_numpy()
        self.psi = np.stack(table["psi"].to_list())

    def __getitem__(self, row):
        image = torch.randint(0, 100, (1, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(row))
        image[:, 2 * self.labels[row] : 2 * self.labels[row] + 3] += 150
        return {"image": image, "label": int(self.labels[row]), "psi": torch.from_numpy(self.psi[row]), "index": row}

    def model_input(self, images):
        return fractal_input(images)


def test_a_validation_leaves_every_module_mode_and_the_random_state_as_it_found_them():
    table = pd.DataFrame({"class_id": np.repeat(np.arange(5), 6), "psi": [np.random.default_rng(i).random(6) for i in range(30)]})
    split = split_table(table, HoldoutSettings(0.34, 0.4), seed=0)
    validation = PretrainValidation(ValidationSettings(every=1, triplets=20), _Renderings(table), split, classifier=True, seed=0)
    torch.manual_seed(0)
    model = build_model("resnet18", img_size=16, head="classifier", num_classes=len(split.training_classes))
    model.train()
    freeze_batchnorm(model)
    modes = [m.training for m in model.modules()]
    state = torch.get_rng_state()
    result = validation(model, step=1)
    assert [m.training for m in model.modules()] == modes
    assert torch.equal(torch.get_rng_state(), state)
    assert set(METRICS) <= set(result) and result["validation_s"] > 0
    assert np.isnan(result["val_probe_recall_at_1"])  # no probe configured
    assert 0 <= result["val_unseen_region_top1"] <= 1 and 0 <= result["val_unseen_class_recall_at_1"] <= 1
