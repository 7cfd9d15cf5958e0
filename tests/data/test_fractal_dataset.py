"""On-the-fly FineFractalDB dataset: reproducible items, fresh noise per epoch, DataLoader workers, shards."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader

from fdsml.data.fractal_dataset import FractalCodesDataset, ShardedImagesDataset
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB
from fdsml.ifs import RenderSettings, determinant_probabilities, psi, random_perturbation, sample_sigma_factor_code
from fdsml.ifs.finefractaldb import FineFractalDBConfig

RENDER = RenderSettings(size=24, points=1500)
SPEC = FamilySpec(FINEFRACTALDB, FineFractalDBConfig(render=RENDER))


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    rows = []
    for class_id in range(2):
        base = sample_sigma_factor_code(rng, (2, 3), (5.0, 6.0), (-1.0, 1.0))
        for instance_id in range(3):
            code, position, factor, _ = random_perturbation(base, rng, (0.9, 1.1))
            probabilities = determinant_probabilities(code)
            rows.append({
                "class_id": class_id, "instance_id": instance_id, "coefficients": code.ravel().tolist(),
                "probabilities": probabilities.tolist(), "psi": psi(code, probabilities).tolist(),
                "seed": int(rng.integers(2**62)), "position": position, "factor": factor,
            })
    return pd.DataFrame(rows)


def test_item_is_the_table_row_rendered_with_its_seed(table):
    item = FractalCodesDataset(table, SPEC, seed=0, channels=3)[4]
    row = table.iloc[4]
    expected = RENDER.render(np.reshape(row["coefficients"], (-1, 6)), row["probabilities"], int(row["seed"]))
    assert item["image"].shape == (3, 24, 24) and item["image"].dtype == torch.float32
    assert torch.equal(item["image"][1], torch.from_numpy(expected).float() / 255)
    assert 0 <= item["image"].min() and item["image"].max() <= 1 and item["image"].max() > 0
    assert item["label"] == 1 and item["index"] == 4
    assert torch.allclose(item["psi"], torch.tensor(row["psi"], dtype=torch.float32))


def test_same_seed_epoch_and_index_give_the_same_image(table):
    first = FractalCodesDataset(table, SPEC, seed=5, fresh_noise=True)
    second = FractalCodesDataset(table, SPEC, seed=5, fresh_noise=True)
    first.set_epoch(3)
    second.set_epoch(3)
    assert torch.equal(first[2]["image"], second[2]["image"])


def test_fresh_noise_changes_across_epochs_and_plain_items_do_not(table):
    fresh = FractalCodesDataset(table, SPEC, seed=5, fresh_noise=True)
    plain = FractalCodesDataset(table, SPEC, seed=5)
    images = {}
    for epoch in (0, 1):
        fresh.set_epoch(epoch)
        plain.set_epoch(epoch)
        images[epoch] = fresh[2]["image"], plain[2]["image"]
    assert not torch.equal(images[0][0], images[1][0])
    assert torch.equal(images[0][1], images[1][1])


def test_renders_inside_dataloader_workers(table):
    dataset = FractalCodesDataset(table, SPEC, seed=1, fresh_noise=True, channels=1)
    dataset.set_epoch(2)
    loader = DataLoader(dataset, batch_size=2, num_workers=2, sampler=[0, 5, 3, 1])
    batches = list(loader)
    assert [b["index"].tolist() for b in batches] == [[0, 5], [3, 1]]
    assert batches[0]["image"].shape == (2, 1, 24, 24) and batches[0]["psi"].shape == (2, 6)
    assert torch.equal(batches[1]["image"][0], dataset[3]["image"])


def test_sharded_images_read_back_in_table_order(table, tmp_path):
    plain = FractalCodesDataset(table, SPEC, seed=0)
    images = np.stack([(plain[i]["image"][0] * 255).round().to(torch.uint8).numpy() for i in range(len(plain))])
    np.save(tmp_path / "shard_00000.npy", images[:4])
    np.save(tmp_path / "shard_00001.npy", images[4:])
    (tmp_path / "manifest.json").write_text(json.dumps({"shards": ["shard_00000.npy", "shard_00001.npy"], "size": 24, "count": 6}))
    sharded = ShardedImagesDataset(tmp_path, table)
    assert len(sharded) == 6
    for index in (0, 3, 4, 5):
        item, expected = sharded[index], plain[index]
        assert torch.equal(item["image"], expected["image"])
        assert item["label"] == expected["label"] and torch.equal(item["psi"], expected["psi"])
    with pytest.raises(ValueError, match="the table has 5 rows"):
        ShardedImagesDataset(tmp_path, table.iloc[:5])
