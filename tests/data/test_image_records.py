"""ImageRecordsDataset and ImageTransform: shapes, channels, crops, flips, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision.transforms.v2.functional as F
from PIL import Image

from fdsml.config import ConfigError
from fdsml.data import ImageRecords, ImageRecordsDataset, ImageTransform, load_image, read_retrieval_dataset


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
    assert load_image(records, 0).shape == (3, 20, 30)
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


def crop_boxes(transform, height, width, draws=4000):
    rng = np.random.default_rng(0)
    return np.array([transform._crop_box(height, width, rng) for _ in range(draws)])


def test_a_training_crop_covers_an_area_fraction_and_aspect_ratio_from_their_ranges_anywhere_in_the_image():
    """Inception's random resized crop: area fraction ~ U(area_range), log aspect ratio ~ U(log ratio_range), the
    box uniform over the positions where it fits; each bound reached (up to rounding), none exceeded."""
    transform = ImageTransform(size=8, train=True, area_range=(0.25, 0.81), ratio_range=(0.5, 2.0))
    height, width = 80, 80  # square: a box too tall to fit is as likely as one too wide
    boxes = crop_boxes(transform, height, width)
    top, left, box_h, box_w = boxes.T
    assert (top >= 0).all() and (left >= 0).all() and (top + box_h <= height).all() and (left + box_w <= width).all()
    area, log_ratio = box_h * box_w / (height * width), np.log(box_w / box_h)
    assert 0.24 < area.min() < 0.26 and 0.79 < area.max() < 0.83
    assert abs(log_ratio.min() - np.log(0.5)) < 0.05 and abs(log_ratio.max() - np.log(2.0)) < 0.05
    assert abs(np.median(log_ratio)) < 0.05  # log-uniform: as many boxes wider than tall as taller than wide
    assert top.min() == 0 and left.min() == 0 and (top + box_h).max() == height and (left + box_w).max() == width


@pytest.mark.parametrize(("height", "width", "box"), [(10, 40, (0, 10, 10, 20)), (40, 10, (10, 0, 20, 10))])
def test_where_no_box_fits_the_crop_is_the_largest_centred_one_in_the_ratio_range(height, width, box):
    """The whole area at aspect ratios 1/2..2 fits neither a 10 x 40 nor a 40 x 10 image: the fallback clamps the ratio."""
    transform = ImageTransform(size=8, train=True, area_range=(1.0, 1.0), ratio_range=(0.5, 2.0))
    assert tuple(transform._crop_box(height, width, np.random.default_rng(0))) == box


def test_a_training_view_is_flipped_half_the_time_and_never_with_flip_off():
    image = torch.arange(16, dtype=torch.uint8).reshape(1, 4, 4).expand(3, 4, 4).clone() * 10
    whole = dict(size=4, train=True, area_range=(1.0, 1.0), ratio_range=(1.0, 1.0))
    plain = image.float() / 255.0
    views = [ImageTransform(**whole)(image, np.random.default_rng(seed)) for seed in range(400)]
    flipped = sum(torch.equal(view, plain.flip(-1)) for view in views)
    assert flipped + sum(torch.equal(view, plain) for view in views) == 400 and 160 < flipped < 240
    unflipped = [ImageTransform(**whole, flip=False)(image, np.random.default_rng(seed)) for seed in range(40)]
    assert all(torch.equal(view, plain) for view in unflipped)


def test_a_training_crop_of_the_whole_image_is_the_image_resized_with_antialiasing():
    """A 8 x 16 image, the whole area at its own aspect ratio 2: the box is the image, resized to 4 x 4 as the test view is."""
    image = torch.from_numpy(random_image(np.random.default_rng(3), (3, 8, 16)))
    transform = ImageTransform(size=4, train=True, flip=False, area_range=(1.0, 1.0), ratio_range=(2.0, 2.0))
    expected = F.resize(image, [4, 4], antialias=True).float() / 255.0
    torch.testing.assert_close(transform(image, np.random.default_rng(0)), expected, rtol=0, atol=0)


def test_each_item_draws_its_own_augmentation_and_says_its_index():
    pixels = random_image(np.random.default_rng(4), (1, 24, 24, 3))
    records = ImageRecords(labels=np.array([0, 0]), images=np.concatenate([pixels, pixels]))
    dataset = ImageRecordsDataset(records, ImageTransform(size=16, train=True), seed=0)
    first, second = dataset[0], dataset[1]
    assert (first["index"], second["index"]) == (0, 1)
    assert not torch.equal(first["image"], second["image"])  # the same picture at two indices: two draws


def test_a_listing_digest_says_what_a_split_holds_never_where(tmp_path):
    for folder in ("here", "there"):
        for name, size in (("a/1.png", 10), ("b/2.png", 20)):
            (tmp_path / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / folder / name).write_bytes(b"x" * size)

    def digest(folder="here", labels=(0, 1), names=("a/1.png", "b/2.png")):
        return ImageRecords(labels=np.array(labels), paths=tuple(tmp_path / folder / name for name in names)).listing_digest()

    reference = digest()
    assert digest("there") == reference  # the same files under another folder
    assert digest(labels=(1, 0)) != reference and digest(names=("b/2.png", "a/1.png")) != reference
    (tmp_path / "there" / "b" / "2.png").write_bytes(b"x" * 21)
    assert digest("there") != reference  # a replaced image of another size
    in_memory = random_image(np.random.default_rng(5), (2, 4, 4))
    held = ImageRecords(labels=np.array([0, 1]), images=in_memory).listing_digest()
    assert held == ImageRecords(labels=np.array([0, 1]), images=in_memory.copy()).listing_digest()
    changed = in_memory.copy()
    changed[1, 0, 0] ^= 1
    assert ImageRecords(labels=np.array([0, 1]), images=changed).listing_digest() != held
    assert ImageRecords(labels=np.array([0, 1]), images=in_memory.reshape(2, 2, 8)).listing_digest() != held  # same bytes, other shape


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"size": 0}, "^size: must be positive"),
        ({"crop_fraction": 0.0}, "^crop_fraction: must lie in"),
        ({"area_range": (0.0, 1.0)}, r"^area_range: range \[0.0, 1.0\] must lie inside"),
        ({"area_range": (0.5, 1.5)}, r"^area_range: range \[0.5, 1.5\] must lie inside"),
        ({"ratio_range": (2.0, 1.0)}, r"^ratio_range: range \[2.0, 1.0\] is empty or inverted"),
        ({"ratio_range": (0.0, 1.0)}, r"^ratio_range\[0\]: must be positive"),
    ],
)
def test_impossible_views_are_refused_naming_the_setting(settings, message):
    with pytest.raises(ConfigError, match=message):
        ImageTransform(**{"size": 8, **settings})


def test_a_view_is_accepted_at_the_edge_of_every_setting():
    assert ImageTransform(size=1, crop_fraction=1.0, area_range=(1e-6, 1.0), ratio_range=(1.0, 1.0)).size == 1
