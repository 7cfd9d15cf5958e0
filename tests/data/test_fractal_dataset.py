"""On-the-fly FineFractalDB dataset: reproducible items, fresh noise per epoch, DataLoader workers (kept across
epochs: the epoch travels with the index), shards."""

import gc
import json
import types

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, default_collate

from fdsml.data import ShuffledBatchSampler
from fdsml.data.epoch_items import EpochBatches, EpochItems, epoch_loader
from fdsml.data.fractal_dataset import FractalCodesDataset, ShardedImagesDataset, fractal_input
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb
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


def _rendered_as_rows(table, index, seed=None):
    """Row ``index`` rendered from its own arrays, as the table stores them."""
    row = table.iloc[index]
    return RENDER.render(np.reshape(row["coefficients"], (-1, 6)), row["probabilities"], int(row["seed"]) if seed is None else seed)


def test_item_is_the_uint8_rendering_of_the_table_row_with_its_seed(table):
    dataset = FractalCodesDataset(table, SPEC, seed=0, channels=3)
    for index in range(len(table)):
        item = dataset[index]
        assert item["image"].shape == (1, 24, 24) and item["image"].dtype == torch.uint8
        assert torch.equal(item["image"][0], torch.from_numpy(_rendered_as_rows(table, index)))
    assert item["image"].max() > 0
    assert item["label"] == 1 and item["index"] == len(table) - 1
    assert torch.allclose(item["psi"], torch.tensor(table.iloc[-1]["psi"], dtype=torch.float32))


def test_fresh_noise_renders_the_row_codes_with_the_epoch_seed(table):
    dataset = FractalCodesDataset(table, SPEC, seed=5, fresh_noise=True)
    dataset.set_epoch(2)
    for index in range(len(table)):
        expected = _rendered_as_rows(table, index, dataset.rendering_seed(index))
        assert torch.equal(dataset[index]["image"][0], torch.from_numpy(expected))


def _reachable_objects(root) -> int:
    """How many Python objects ``root`` holds, directly or not (types, modules and functions aside)."""
    seen, stack = set(), [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        stack.extend(gc.get_referents(obj))
    return len(seen)


def test_codes_are_held_in_flat_arrays_whatever_the_number_of_rows(table):
    """Forked workers copy on write every object they touch: a million rows must not be a million objects."""
    larger = pd.concat([table] * 10, ignore_index=True)
    small, large = FractalCodesDataset(table, SPEC, seed=0), FractalCodesDataset(larger, SPEC, seed=0)
    assert _reachable_objects(large) == _reachable_objects(small)
    assert torch.equal(large[len(table) + 4]["image"], small[4]["image"])


def _old_per_item_input(image: np.ndarray, img_size: int, channels: int) -> torch.Tensor:
    """What a worker shipped before, per item: float32 / 255, resized alone, replicated over channels."""
    single = torch.from_numpy(image.astype(np.float32)).div_(255.0).reshape(1, 1, *image.shape)
    if image.shape != (img_size, img_size):
        single = F.interpolate(single, size=(img_size, img_size), mode="bilinear", antialias=True, align_corners=False)
    return single.expand(-1, channels, -1, -1).contiguous()[0]


@pytest.mark.parametrize("img_size", [24, 16, 32])
def test_a_batch_converted_at_once_is_bit_identical_to_the_old_per_item_input(table, img_size):
    dataset = FractalCodesDataset(table, SPEC, seed=3, fresh_noise=True, img_size=img_size)
    dataset.set_epoch(1)
    batch = next(iter(DataLoader(dataset, batch_size=len(dataset))))
    converted = dataset.model_input(batch["image"])
    expected = torch.stack([_old_per_item_input(dataset[i]["image"][0].numpy(), img_size, 3) for i in range(len(dataset))])
    assert converted.shape == (len(dataset), 3, img_size, img_size) and converted.dtype == torch.float32
    assert torch.equal(converted, expected)
    assert torch.equal(fractal_input(batch["image"][:, 0].numpy(), img_size), expected)
    assert torch.equal(fractal_input(batch["image"][2, 0].numpy(), img_size), expected[2])


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
    assert batches[0]["image"].shape == (2, 1, 24, 24) and batches[0]["image"].dtype == torch.uint8
    assert batches[0]["psi"].shape == (2, 6)
    assert torch.equal(batches[1]["image"][0], dataset[3]["image"])


def _epochs(dataset, num_workers: int, offsets=(0, 0)) -> list[list[tuple[bytes, list[int]]]]:
    """Each epoch's batches (image bytes, indices), read through one loader whose workers live for all epochs."""
    batches = EpochBatches(ShuffledBatchSampler(len(dataset), 2, seed=3))
    loader = epoch_loader(dataset, batches, num_workers=num_workers)
    epochs = []
    for epoch, offset in enumerate(offsets):
        batches.start(epoch, offset)
        epochs.append([(batch["image"].numpy().tobytes(), batch["index"].tolist()) for batch in loader])
    return epochs


def test_persistent_workers_give_the_bytes_of_no_workers_across_epochs(table):
    dataset = FractalCodesDataset(table, SPEC, seed=7, fresh_noise=True)
    without = _epochs(dataset, num_workers=0)
    assert _epochs(dataset, num_workers=2) == without
    first, second = ([images for images, _ in epoch] for epoch in without)
    assert first != second  # fresh noise: the epochs differ, so a worker stuck at epoch 0 would show


def test_an_offset_skips_the_first_batches_of_its_epoch_only(table):
    dataset = FractalCodesDataset(table, SPEC, seed=7, fresh_noise=True)
    full, resumed = _epochs(dataset, num_workers=0), _epochs(dataset, num_workers=0, offsets=(2, 1))
    assert resumed[0] == full[0][2:] and resumed[1] == full[1][1:]
    assert len(full[0]) == 3


def test_sharded_images_read_back_in_table_order(table, tmp_path):
    plain = FractalCodesDataset(table, SPEC, seed=0)
    images = np.stack([plain[i]["image"][0].numpy() for i in range(len(plain))])
    np.save(tmp_path / "shard_00000.npy", images[:4])
    np.save(tmp_path / "shard_00001.npy", images[4:])
    (tmp_path / "manifest.json").write_text(json.dumps({"shards": ["shard_00000.npy", "shard_00001.npy"], "size": 24, "count": 6}))
    sharded = ShardedImagesDataset(tmp_path, table, img_size=16)
    assert len(sharded) == 6 and sharded.model_input(sharded[0]["image"][None]).shape == (1, 3, 16, 16)
    for index in (0, 3, 4, 5):
        item, expected = sharded[index], plain[index]
        assert torch.equal(item["image"], expected["image"])
        assert item["label"] == expected["label"] and torch.equal(item["psi"], expected["psi"])
    with pytest.raises(ValueError, match="the table has 5 rows"):
        ShardedImagesDataset(tmp_path, table.iloc[:5])


def _collated_items(dataset, indices):
    return default_collate([dataset[index] for index in indices])


def _assert_same_batch(batch, expected):
    assert batch.keys() == expected.keys()
    for key, value in expected.items():
        assert batch[key].dtype == value.dtype and torch.equal(batch[key], value), key


@pytest.mark.parametrize("options", [{}, {"fresh_noise": True}, {"instances": "fresh"}])
def test_a_batch_filled_in_arrays_is_the_collated_items(options):
    """The one-call-per-batch path (``collated_items``) gives what collating each item gives, bytes and dtypes."""
    config = FineFractalDBConfig(seed=1, n_classes=2, instances_per_class=4, render=RENDER)
    table = generate_finefractaldb(config)[0]
    dataset = FractalCodesDataset(table, FamilySpec(FINEFRACTALDB, config), seed=3, **options)
    dataset.set_epoch(1)
    indices = np.array([6, 1, 3, 3])
    _assert_same_batch(dataset.collated_items(indices), _collated_items(dataset, indices))
    if options.get("instances") == "fresh":  # each fresh instance carries its own descriptor, not its row's
        assert not torch.equal(dataset.collated_items(indices)["psi"][0], torch.from_numpy(dataset.psi[6]))


def test_sharded_and_relabelled_batches_are_the_collated_items(table, tmp_path):
    from fdsml.data.holdout import HoldoutSettings, TrainingRows, split_table

    plain = FractalCodesDataset(table, SPEC, seed=0)
    np.save(tmp_path / "shard_00000.npy", np.stack([plain[i]["image"][0].numpy() for i in range(len(plain))]))
    (tmp_path / "manifest.json").write_text(json.dumps({"shards": ["shard_00000.npy"], "size": 24, "count": 6}))
    sharded = ShardedImagesDataset(tmp_path, table)
    _assert_same_batch(sharded.collated_items(np.array([5, 0, 2])), _collated_items(sharded, [5, 0, 2]))
    rows = TrainingRows(plain, split_table(table, HoldoutSettings(0.0, 0.5), seed=2))
    assert plain.labels[rows.rows].tolist() == [1, 1, 1] and rows.labels.tolist() == [0, 0, 0]  # class 0 held out: 1 becomes 0
    _assert_same_batch(rows.collated_items(np.array([2, 0])), _collated_items(rows, [2, 0]))


def test_a_loader_batch_comes_from_one_epoch(table):
    items = EpochItems(FractalCodesDataset(table, SPEC, seed=0, fresh_noise=True))
    with pytest.raises(ValueError, match="one epoch"):
        items.__getitems__([(0, 1), (1, 2)])
    _assert_same_batch(items.__getitems__([(1, 4), (1, 0)]), _collated_items(items, [(1, 4), (1, 0)]))


@pytest.mark.parametrize("options", [{}, {"fresh_noise": True}, {"instances": "fresh"}])
def test_every_training_batch_pairs_each_image_with_the_descriptor_of_the_code_it_renders(options):
    """What the loss receives, through the loop's own loader: held-out split, relabelling, class-balanced batches,
    one collated call per batch, two epochs. ``psi`` is recomputed from the code actually rendered, not read back."""
    from fdsml.data import ClassBalancedBatchSampler
    from fdsml.data.holdout import HoldoutSettings, TrainingRows, split_table

    config = FineFractalDBConfig(seed=2, n_classes=3, instances_per_class=4, render=RENDER)
    spec = FamilySpec(FINEFRACTALDB, config)
    table = generate_finefractaldb(config)[0]
    split = split_table(table, HoldoutSettings(instance_fraction=0.25), seed=0)
    dataset = FractalCodesDataset(table, spec, seed=4, **options)
    rows = TrainingRows(dataset, split)
    batches = EpochBatches(ClassBalancedBatchSampler(rows.labels, 2, 3, seed=0))
    loader = epoch_loader(rows, batches, num_workers=0)
    checked = 0
    for epoch in (0, 1):
        batches.start(epoch)
        dataset.set_epoch(epoch)
        for batch in loader:
            for image, label, descriptor, index in zip(batch["image"], batch["label"], batch["psi"], batch["index"].tolist()):
                if options.get("instances") == "fresh":
                    drawn = dataset.fresh_instance(index)
                    instance, rendering = drawn.instance, drawn.image
                else:
                    instance = spec.instance(table.iloc[index])
                    rendering = spec.render(instance, dataset.rendering_seed(index))
                assert torch.equal(image[0], torch.from_numpy(rendering))
                expected = psi(instance.coefficients, instance.probabilities)
                torch.testing.assert_close(descriptor, torch.from_numpy(expected).float())
                assert label.item() == split.training_labels(np.array([table["class_id"].iloc[index]]))[0]
                checked += 1
    assert checked == 2 * len(batches.sampler) * 6
