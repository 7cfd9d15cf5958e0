"""The held-out split: disjoint parts, seeded and reproducible, fractions respected, bad fractions named,
and held-out instances that no training instance lies near."""

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import cdist, pdist

from fdsml.config import ConfigError
from fdsml.data.holdout import HoldoutSettings, TrainingRows, split_table
from fdsml.data.fractals_config import parse_fractals_params


def _table(n_classes=10, instances=20, first_class=0):
    """The table shape every formula family shares: one row per instance, a class id and a descriptor."""
    class_ids = np.repeat(np.arange(first_class, first_class + n_classes), instances)
    return pd.DataFrame({"class_id": class_ids, "psi": [np.full(6, float(i)) for i in range(len(class_ids))]})


def test_the_parts_are_disjoint_cover_the_table_and_respect_the_fractions():
    table = _table()
    split = split_table(table, HoldoutSettings(instance_fraction=0.1, class_fraction=0.2), seed=0)
    parts = [split.training, split.heldout_instances, split.heldout_classes, split.guard]
    assert sum(len(p) for p in parts) == len(table)
    assert len(np.unique(np.concatenate(parts))) == len(table)
    class_ids = table["class_id"].to_numpy()
    held_classes = np.unique(class_ids[split.heldout_classes])
    assert len(held_classes) == 2 and len(split.heldout_classes) == 2 * 20
    assert not np.isin(class_ids[split.training], held_classes).any()
    assert np.array_equal(split.training_classes, np.setdiff1d(np.arange(10), held_classes))
    # 2 of every training class's 20 instances held out, 18 trained on
    assert np.array_equal(np.bincount(class_ids[split.heldout_instances], minlength=10)[split.training_classes], [2] * 8)
    assert np.array_equal(np.bincount(class_ids[split.training], minlength=10)[split.training_classes], [18] * 8)


def test_the_split_is_a_pure_function_of_table_settings_and_seed():
    table, settings = _table(), HoldoutSettings(0.1, 0.2)
    first, again = split_table(table, settings, seed=3), split_table(table.copy(), settings, seed=3)
    np.random.seed(123)  # no global state involved
    other_seed = split_table(table, settings, seed=4)
    assert all(np.array_equal(a, b) for a, b in zip(
        (first.training, first.heldout_instances, first.heldout_classes),
        (again.training, again.heldout_instances, again.heldout_classes),
    ))
    assert not np.array_equal(first.heldout_instances, other_seed.heldout_instances)


def test_zero_fractions_train_on_every_row():
    split = split_table(_table(3, 4), HoldoutSettings(0.0, 0.0), seed=0)
    assert np.array_equal(split.training, np.arange(12))
    assert len(split.heldout) == 0


def test_training_rows_number_the_training_classes_from_zero_for_the_classifier():
    table = _table(4, 5, first_class=7)
    split = split_table(table, HoldoutSettings(0.0, 0.25), seed=1)

    class Items:
        labels = table["class_id"].to_numpy()
        psi = np.stack(table["psi"].to_list())

        def __getitem__(self, row):
            return {"label": int(self.labels[row]), "index": row}

    rows = TrainingRows(Items(), split)
    assert set(rows.labels.tolist()) == {0, 1, 2}
    item = rows[len(rows) - 1]
    assert item["index"] == split.training[-1]  # the table row, so fresh noise does not depend on the split
    assert split.training_classes[item["label"]] == table["class_id"][item["index"]]


@pytest.mark.parametrize(
    ("holdout", "key"),
    [
        ({"instance_fraction": 1.0}, "fractals.holdout.instance_fraction"),
        ({"class_fraction": -0.1}, "fractals.holdout.class_fraction"),
    ],
)
def test_a_bad_fraction_is_a_config_error_naming_its_key(holdout, key):
    with pytest.raises(ConfigError, match=key):
        parse_fractals_params({"holdout": holdout})


def test_a_fraction_leaving_nothing_to_train_on_names_its_key():
    with pytest.raises(ConfigError, match="fractals.holdout.class_fraction"):
        split_table(_table(2, 5), HoldoutSettings(0.0, 0.9), seed=0)
    with pytest.raises(ConfigError, match="fractals.holdout.instance_fraction"):
        split_table(_table(2, 2), HoldoutSettings(0.9, 0.0), seed=0)


def _perturbed_table(n_classes=20, instances=200, seed=0):
    """Like FineFractalDB: every instance rescales one of six coordinates of its class code by s ~ U[0.6, 1.4],
    so each class's instances lie on six rays through its code, near-duplicates of each other."""
    rng = np.random.default_rng(seed)
    codes = rng.normal(size=(n_classes, 6))
    class_ids = np.repeat(np.arange(n_classes), instances)
    psi = codes[class_ids].copy()
    positions = rng.integers(6, size=len(class_ids))
    psi[np.arange(len(class_ids)), positions] *= rng.uniform(0.6, 1.4, size=len(class_ids))
    return pd.DataFrame({"class_id": class_ids, "psi": list(psi)})


def test_no_training_instance_lies_closer_to_a_held_out_one_than_the_gap():
    """Held out one by one, instances keep near-duplicates in training (a memorisation test): the region and
    its guard leave every training instance at least gap x the class's median descriptor distance away."""
    table, gap = _perturbed_table(), 0.1
    split = split_table(table, HoldoutSettings(instance_fraction=0.1, class_fraction=0.1), seed=0)
    class_ids, psi = table["class_id"].to_numpy(), np.stack(table["psi"].to_list())
    for label in split.training_classes:
        rows = np.flatnonzero(class_ids == label)
        held, trained = np.intersect1d(rows, split.heldout_instances), np.intersect1d(rows, split.training)
        assert len(held) == 20 and len(trained) >= 100
        nearest = cdist(psi[held], psi[trained]).min()
        assert nearest > gap * np.median(pdist(psi[rows])), (label, nearest)


def test_a_gap_leaving_a_class_nothing_to_train_on_names_its_key():
    copies = pd.DataFrame({"class_id": np.repeat([0, 1], 5), "psi": [np.full(6, c, dtype=float) for c in np.repeat([0, 1], 5)]})
    with pytest.raises(ConfigError, match="fractals.holdout.gap"):  # identical instances: all of them in the guard
        split_table(copies, HoldoutSettings(instance_fraction=0.2), seed=0)
