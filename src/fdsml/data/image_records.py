"""A torch ``Dataset`` over :class:`ImageRecords`: decoded, augmented 3-channel images in [0, 1].

Training view: a random resized crop and a horizontal flip; test view: resize then centre
crop (the usual 256 -> 224 ratio by default). Grey images are replicated to three channels.
Random draws come from a per-item ``numpy`` generator seeded by (seed, epoch, index), so
an item's augmentation is reproducible in any worker and changes with :meth:`set_epoch`.
Images stay in [0, 1]: the model applies the input normalisation its file records
(:mod:`fdsml.models.normalisation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torchvision.transforms.v2.functional as F
from PIL import Image
from torch.utils.data import Dataset

from fdsml.config import require_fraction, require_positive, require_range
from fdsml.data.retrieval_datasets import DatasetLayoutError, ImageRecords
from fdsml.seeds import generator

_CROP_ATTEMPTS = 10


def test_view(image: torch.Tensor, size: int, crop_fraction: float) -> torch.Tensor:
    """The test view of a (3, H, W) image: short side resized to ``size / crop_fraction``, centre ``size`` x ``size`` kept.

    The one test view of the project: classification scores through it, and the robustness
    pipeline corrupts (or scores) exactly these images, so its clean error is 1 - top-1.
    """
    image = F.resize(image, [round(size / crop_fraction)], antialias=True)
    return F.center_crop(image, [size, size])


@dataclass(frozen=True)
class ImageTransform:
    """Turns a uint8 (3, H, W) image into a float (3, size, size) tensor in [0, 1].

    ``train``: random resized crop (area fraction in ``area_range``, aspect ratio in
    ``ratio_range``) and, with ``flip``, a horizontal flip with probability 1/2 (turn it off
    where mirroring changes the class, as for digits). Otherwise: resize the
    short side to ``size / crop_fraction`` and take the centre ``size`` x ``size``.
    """

    size: int
    train: bool = False
    crop_fraction: float = 0.875
    flip: bool = True
    area_range: tuple[float, float] = (0.08, 1.0)
    ratio_range: tuple[float, float] = (3 / 4, 4 / 3)

    def __post_init__(self) -> None:
        require_positive("size", self.size)
        require_fraction("crop_fraction", self.crop_fraction, inclusive_zero=False)
        require_range("area_range", self.area_range, within=(1e-6, 1.0))
        require_range("ratio_range", self.ratio_range)
        require_positive("ratio_range[0]", self.ratio_range[0])

    def __call__(self, image: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
        if self.train:
            top, left, height, width = self._crop_box(image.shape[-2], image.shape[-1], rng)
            image = F.resized_crop(image, top, left, height, width, [self.size, self.size], antialias=True)
            if self.flip and rng.random() < 0.5:
                image = F.horizontal_flip(image)
        else:
            image = test_view(image, self.size, self.crop_fraction)
        return image.float() / 255.0

    def _crop_box(self, height: int, width: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
        """A box covering a random area fraction with a random (log-uniform) aspect ratio."""
        log_ratios = np.log(self.ratio_range)
        for _ in range(_CROP_ATTEMPTS):
            area = height * width * rng.uniform(*self.area_range)
            ratio = math.exp(rng.uniform(*log_ratios))
            box_w, box_h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
            if 0 < box_w <= width and 0 < box_h <= height:
                return int(rng.integers(0, height - box_h + 1)), int(rng.integers(0, width - box_w + 1)), box_h, box_w
        # no box fitted: the largest centred box whose aspect ratio lies in the range
        ratio = min(max(width / height, self.ratio_range[0]), self.ratio_range[1])
        box_w, box_h = min(width, round(height * ratio)), min(height, round(width / ratio))
        return (height - box_h) // 2, (width - box_w) // 2, box_h, box_w


def decode_image(path) -> np.ndarray:
    """The RGB pixels of the image file at ``path``; a file that does not decode stops the run, named."""
    try:
        with Image.open(path) as image:
            return np.array(image.convert("RGB"))
    except (OSError, SyntaxError, ValueError) as error:
        raise DatasetLayoutError(
            f"{path}: cannot decode this image ({error}); replace it with a good copy or remove it from the dataset folder"
        ) from error


def load_image(records: ImageRecords, index: int) -> torch.Tensor:
    """Record ``index``'s raw image as uint8 (3, H, W), grey replicated to three channels: what every view of it
    (training's, the test view, an example figure's) starts from."""
    if records.images is not None:
        pixels = np.array(records.images[index])  # a copy: the array may be a read-only memory map
    else:
        pixels = decode_image(records.paths[index])
    if pixels.ndim == 2:
        pixels = np.repeat(pixels[:, :, None], 3, axis=2)
    return torch.from_numpy(np.ascontiguousarray(pixels)).permute(2, 0, 1)


class ImageRecordsDataset(Dataset):
    """Yields ``(image, label)``: a float (3, size, size) tensor and the record's integer label."""

    def __init__(self, records: ImageRecords, transform: ImageTransform, *, seed: int = 0) -> None:
        self.records = records
        self.transform = transform
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """New augmentations for a new epoch (workers that persist across epochs keep the old one)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> dict:
        """``{"image": (3, size, size) float tensor, "label": int, "index": int}``, the training loop's item."""
        rng = generator(self.seed, "augmentation", self.epoch, index)
        image = self.transform(load_image(self.records, index), rng)
        return {"image": image, "label": int(self.records.labels[index]), "index": index}
