"""Images as the models saw them: fractals as in pre-training, real images as in evaluation.

Fractal renderings (uint8, 0 = background) become grey / 255 replicated over the model's
input channels and resized to its input size, exactly as the pre-training dataset feeds
them. Real images take the evaluation view (resize, centre crop, ImageNet normalisation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fdsml.data import ImageRecords, read_retrieval_dataset


def fractal_tensor(images: np.ndarray, img_size: int, channels: int = 3) -> torch.Tensor:
    """(n, S, S) uint8 renderings -> float (n, channels, img_size, img_size) in [0, 1]."""
    images = np.asarray(images)
    if images.ndim != 3:
        raise ValueError(f"expected (n, S, S) renderings, got shape {images.shape}")
    tensor = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    if images.shape[1:] != (img_size, img_size):
        tensor = F.interpolate(tensor, size=(img_size, img_size), mode="bilinear", antialias=True, align_corners=False)
    return tensor.expand(-1, channels, -1, -1).contiguous()


@dataclass(frozen=True, eq=False)
class RealImages:
    """A fixed choice of real images; each model gets them at its own input size."""

    records: ImageRecords
    dataset: str

    def __len__(self) -> int:
        return len(self.records)

    @property
    def labels(self) -> np.ndarray:
        return self.records.labels

    def batch(self, size: int, channels: int = 3) -> torch.Tensor:
        """The evaluation view, normalised: float (n, channels, size, size)."""
        from fdsml.data import ImageRecordsDataset, ImageTransform

        dataset = ImageRecordsDataset(self.records, ImageTransform(size, train=False))
        tensor = torch.stack([dataset[i]["image"] for i in range(len(dataset))])
        return tensor if channels == 3 else tensor.mean(dim=1, keepdim=True).expand(-1, channels, -1, -1).contiguous()

    def display(self, size: int) -> np.ndarray:
        """The same view for people: (n, size, size, 3) float in [0, 1], normalisation undone."""
        from fdsml.data import ImageTransform

        transform = ImageTransform(size, train=False)
        mean = torch.tensor(transform.mean).view(1, 3, 1, 1)
        std = torch.tensor(transform.std).view(1, 3, 1, 1)
        return (self.batch(size) * std + mean).clamp(0, 1).permute(0, 2, 3, 1).numpy()


def real_images(dataset: str, root: str | None, split: str, n_images: int, rng: np.random.Generator) -> RealImages:
    """``n_images`` images drawn without replacement from one split of a retrieval dataset (all if fewer)."""
    splits = read_retrieval_dataset(dataset, root)
    records = getattr(splits, split, None)
    if records is None:
        available = [p for p in ("train", "test", "query", "gallery") if getattr(splits, p, None) is not None]
        raise ValueError(f"dataset {dataset!r} has no split {split!r}; available: {', '.join(available)}")
    chosen = np.sort(rng.choice(len(records), size=min(n_images, len(records)), replace=False))
    return RealImages(records.subset(chosen), dataset)
