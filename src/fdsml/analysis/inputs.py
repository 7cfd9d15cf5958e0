"""Real images as the models saw them in evaluation (resize, centre crop, in [0, 1]; each model normalises them itself).

Fractal renderings enter through :func:`fdsml.data.fractal_input`, the pre-training pipeline itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fdsml.data import ImageRecords, read_retrieval_dataset


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
        """The evaluation view: float (n, channels, size, size) in [0, 1]."""
        from fdsml.data import ImageRecordsDataset, ImageTransform

        dataset = ImageRecordsDataset(self.records, ImageTransform(size, train=False))
        tensor = torch.stack([dataset[i]["image"] for i in range(len(dataset))])
        return tensor if channels == 3 else tensor.mean(dim=1, keepdim=True).expand(-1, channels, -1, -1).contiguous()

    def display(self, size: int) -> np.ndarray:
        """The same view for people: (n, size, size, 3) float in [0, 1]."""
        return self.batch(size).permute(0, 2, 3, 1).numpy()


def real_images(dataset: str, root: str | None, split: str, n_images: int, rng: np.random.Generator) -> RealImages:
    """``n_images`` images drawn without replacement from one split of a retrieval dataset (all if fewer)."""
    splits = read_retrieval_dataset(dataset, root)
    records = getattr(splits, split, None)
    if records is None:
        available = [p for p in ("train", "test", "query", "gallery") if getattr(splits, p, None) is not None]
        raise ValueError(f"dataset {dataset!r} has no split {split!r}; available: {', '.join(available)}")
    chosen = np.sort(rng.choice(len(records), size=min(n_images, len(records)), replace=False))
    return RealImages(records.subset(chosen), dataset)
