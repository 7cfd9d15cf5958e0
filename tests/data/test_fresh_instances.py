"""Unbounded FineFractalDB: a new instance of the row's class for every (seed, epoch, index), drawn in the loader."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from fdsml.errors import GenerationError
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb
from fdsml.ifs import determinant_probabilities, is_contractive, psi
from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig, Perturbation, RenderSettings
from fdsml.data.fractal_dataset import FractalCodesDataset

CONFIG = FineFractalDBConfig(
    seed=1, n_classes=3, instances_per_class=4, render=RenderSettings(size=24, points=600), class_filter=ClassFilter(enabled=False)
)
SPEC = FamilySpec(FINEFRACTALDB, CONFIG)


@pytest.fixture(scope="module")
def table():
    return generate_finefractaldb(CONFIG)[0]


def fresh(table, spec=SPEC, seed=7, **options):
    return FractalCodesDataset(table, spec, seed=seed, instances="fresh", img_size=24, **options)


def test_the_same_seed_epoch_and_index_give_the_same_bytes_and_psi(table):
    first, second = fresh(table), fresh(table)
    first.set_epoch(2)
    second.set_epoch(2)
    a, b = first[5], second[5]
    assert torch.equal(a["image"], b["image"]) and torch.equal(a["psi"], b["psi"])
    assert a["label"] == table["class_id"].iloc[5] and a["index"] == 5


def test_another_epoch_draws_another_instance_of_the_same_class(table):
    dataset = fresh(table)
    row = table.iloc[6]
    class_code = FINEFRACTALDB.class_code(table[table["class_id"] == row["class_id"]], CONFIG)
    drawn = {}
    for epoch in (0, 1):
        dataset.set_epoch(epoch)
        drawn[epoch] = dataset.fresh_instance(6).instance
        assert dataset[6]["label"] == row["class_id"]
    assert not np.array_equal(drawn[0].coefficients, drawn[1].coefficients)
    for instance in drawn.values():  # each is the class code with one position rescaled, as the table's rows are
        expected = FINEFRACTALDB.rescaled(class_code, instance.position, instance.factor, CONFIG)[0]
        np.testing.assert_allclose(instance.coefficients, expected.coefficients, rtol=1e-12)
        assert CONFIG.perturbation.factor_range[0] <= instance.factor <= CONFIG.perturbation.factor_range[1]


def test_psi_is_the_fresh_instances_descriptor_not_the_tables(table):
    dataset = fresh(table)
    dataset.set_epoch(3)
    for index in (0, 4, 11):
        instance = dataset.fresh_instance(index).instance
        recomputed = psi(instance.coefficients, determinant_probabilities(instance.coefficients))
        item = dataset[index]
        np.testing.assert_allclose(item["psi"].numpy(), recomputed.astype(np.float32), rtol=1e-6)
        assert not np.allclose(item["psi"].numpy(), np.float32(table["psi"].iloc[index]))


def test_invalid_and_empty_draws_are_rejected(table):
    wide = FineFractalDBConfig(**{**vars(CONFIG), "perturbation": Perturbation(factor_range=(0.2, 3.0)), "min_occupancy": 0.05})
    dataset = fresh(table, FamilySpec(FINEFRACTALDB, wide))
    factors = []
    for epoch in range(4):
        dataset.set_epoch(epoch)
        for index in range(len(dataset)):
            drawn = dataset.fresh_instance(index)
            factors.append(drawn.instance.factor)
            assert is_contractive(drawn.instance.coefficients) and drawn.occupancy >= 0.05
            assert torch.equal(dataset[index]["image"][0], torch.from_numpy(drawn.image))
    assert max(factors) > 1.4  # the wide range is really drawn from; what survives is valid


def test_a_class_whose_draws_all_fail_stops_with_a_clear_error(table):
    impossible = FineFractalDBConfig(**{**vars(CONFIG), "min_occupancy": 1.0, "perturbation": Perturbation(max_attempts=3)})
    with pytest.raises(GenerationError, match=r"fresh instance of item 2 \(class 0, epoch 0\): every one of 3 draws was rejected.*instances: table"):
        fresh(table, FamilySpec(FINEFRACTALDB, impossible))[2]


def test_fresh_instances_are_drawn_in_dataloader_workers_as_in_the_main_process(table):
    dataset = fresh(table, channels=1)
    dataset.set_epoch(1)
    batches = list(DataLoader(dataset, batch_size=2, num_workers=2, sampler=[0, 5, 9, 3]))
    assert torch.equal(batches[1]["image"][0], dataset[9]["image"]) and torch.equal(batches[1]["psi"][0], dataset[9]["psi"])
    assert batches[0]["psi"].shape == (2, 6)


def test_fresh_instances_are_a_pretraining_choice_that_needs_rendering():
    from fdsml.config import ConfigError
    from fdsml.training.pretrain import parse_pretrain_params

    assert parse_pretrain_params({"data": {"instances": "fresh"}}).data.instances == "fresh"
    with pytest.raises(ConfigError, match=r"pretrain\.data\.instances: 'fresh' .* needs pretrain\.data\.source: render"):
        parse_pretrain_params({"data": {"instances": "fresh", "source": "shards"}})
    with pytest.raises(ConfigError, match=r"pretrain\.data\.instances"):
        parse_pretrain_params({"data": {"instances": "unbounded"}})
