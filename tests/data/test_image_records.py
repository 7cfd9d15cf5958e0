"""ImageRecordsDataset and ImageTransform: shapes, channels, crops, flips, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from fdsml.config import ConfigError
from fdsml.data import ImageRecords, ImageRecordsDataset, ImageTransform, read_retrieval_dataset


def random_image(rng, shape):
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def test_digits_give_three_channel_tensors_at_the_requested_size():
    splits = read_retrieval_dataset("digits")
    for train in (True, False):
        dataset = ImageRecordsDataset(splits.test, ImageTransform(size=32, train=train))
        loaded = next(iter(torch.utils.data.DataLoader(dataset, batch_size=6)))
        batch, labels = loaded["image"], loaded["label"]
        assert batch.shape == (6, 3, 32, 32) and batch.dtype == torch.float32
        assert labels.tolist() == splits.test.labels[:6].tolist()


def test_grey_images_are_replicated_to_three_channels():
    rng = np.random.default_rng(0)
    records = ImageRecords(labels=np.array([0]), images=random_image(rng, (1, 12, 12)))
    image = ImageRecordsDataset(records, ImageTransform(size=8, train=True))[0]["image"]
    assert torch.equal(image[0], image[1]) and torch.equal(image[1], image[2])


def test_test_view_is_resize_then_centre_crop_and_ignores_seed_and_epoch():
    rng = np.random.default_rng(1)
    pixels = random_image(rng, (1, 10, 10, 3))
    records = ImageRecords(labels=np.array([4]), images=pixels)
    # short side 8 / 0.8 = 10: no resize, then the centre 8 x 8
    dataset = ImageRecordsDataset(records, ImageTransform(size=8, crop_fraction=0.8), seed=1)
    image, label = dataset[0]["image"], dataset[0]["label"]
    expected = torch.from_numpy(pixels[0, 1:9, 1:9]).permute(2, 0, 1).float() / 255
    assert label == 4
    torch.testing.assert_close(image, expected)
    other = ImageRecordsDataset(records, ImageTransform(size=8, crop_fraction=0.8), seed=99)
    other.set_epoch(5)
    assert torch.equal(other[0]["image"], image)


def test_train_view_is_reproducible_per_seed_epoch_and_index_and_varies_otherwise():
    rng = np.random.default_rng(2)
    records = ImageRecords(labels=np.array([0, 1]), images=random_image(rng, (2, 24, 24, 3)))
    transform = ImageTransform(size=16, train=True)
    first, again = ImageRecordsDataset(records, transform, seed=3), ImageRecordsDataset(records, transform, seed=3)
    assert torch.equal(first[1]["image"], again[1]["image"])
    later = first[1]["image"]
    first.set_epoch(1)
    assert not torch.equal(first[1]["image"], later)
    assert not torch.equal(ImageRecordsDataset(records, transform, seed=4)[1]["image"], later)


def test_full_area_square_crop_is_the_image_or_its_mirror_and_both_occur():
    rng = np.random.default_rng(3)
    pixels = random_image(rng, (1, 8, 8, 3))
    records = ImageRecords(labels=np.array([0]), images=pixels)
    transform = ImageTransform(size=8, train=True, area_range=(1.0, 1.0), ratio_range=(1.0, 1.0))
    original = torch.from_numpy(pixels[0]).permute(2, 0, 1).float() / 255
    seen = set()
    for seed in range(20):
        image = ImageRecordsDataset(records, transform, seed=seed)[0]["image"]
        if torch.equal(image, original):
            seen.add("same")
        else:
            torch.testing.assert_close(image, original.flip(-1))
            seen.add("mirror")
    assert seen == {"same", "mirror"}


def test_crop_boxes_lie_inside_the_image_with_area_and_ratio_in_range():
    transform = ImageTransform(size=8, train=True, area_range=(0.25, 0.5), ratio_range=(0.5, 2.0))
    rng = np.random.default_rng(4)
    for _ in range(200):
        top, left, height, width = transform._crop_box(40, 60, rng)
        assert 0 <= top and top + height <= 40 and 0 <= left and left + width <= 60
        assert 0.2 <= height * width / 2400 <= 0.55
        assert 0.45 <= width / height <= 2.2


def test_images_are_read_from_files_colour_and_grey(tmp_path):
    rng = np.random.default_rng(5)
    Image.fromarray(random_image(rng, (20, 30, 3))).save(tmp_path / "colour.png")
    Image.fromarray(random_image(rng, (20, 30))).save(tmp_path / "grey.png")
    records = ImageRecords(labels=np.array([3, 7]), paths=[tmp_path / "colour.png", tmp_path / "grey.png"])
    dataset = ImageRecordsDataset(records, ImageTransform(size=16))
    assert dataset.load_image(0).shape == (3, 20, 30)
    grey, label = dataset[1]["image"], dataset[1]["label"]
    assert grey.shape == (3, 16, 16) and label == 7
    assert torch.equal(grey[0], grey[2])


def test_bad_transform_parameters_are_named():
    with pytest.raises(ConfigError, match="size"):
        ImageTransform(size=0)
    with pytest.raises(ConfigError, match="crop_fraction"):
        ImageTransform(size=8, crop_fraction=1.5)
    with pytest.raises(ConfigError, match="area_range"):
        ImageTransform(size=8, area_range=(0.5, 0.1))
