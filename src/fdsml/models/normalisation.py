"""The one input normalisation: how pixels in [0, 1] become what a trunk's first layer sees.

It is decided once, here, and travels inside every model: :class:`EmbeddingModel` normalises its
input itself with the mean and std recorded in its configuration (so in its model file), and every
consumer (pre-training and its validation, the frozen probe, fine-tuning, classification,
robustness, the analysis pictures) hands it images in [0, 1]. The timm export writes the same
values into ``pretrained_cfg`` for users who load the bare trunk.

The choice is ImageNet's per-channel statistics, timm's default: a trunk exported to timm is then
used with timm's own data pipeline unchanged, and an ImageNet-initialised trunk fine-tuned in the
project sees what it was trained on. Grey images (renderings, digits, characters) are replicated
to three channels before it; see docs/real-data.md for the measurement behind the change.
"""

from __future__ import annotations

import torch
from torch import nn

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
INPUT_MEAN = IMAGENET_MEAN
"""The project's input mean per channel (one value stands for every channel)."""
INPUT_STD = IMAGENET_STD
"""The project's input standard deviation per channel (one value stands for every channel)."""


def channel_values(values, in_chans: int, key: str) -> tuple[float, ...]:
    """``values`` spread over ``in_chans`` channels: one value for all, or exactly one per channel."""
    values = tuple(float(v) for v in values)
    if len(values) == 1:
        return values * in_chans
    if len(values) == in_chans:
        return values
    if in_chans < len(values):  # a grey trunk: the mean of the colour channels' statistics
        return (sum(values) / len(values),) * in_chans
    raise ValueError(f"{key}: give 1 or {in_chans} values (the trunk's input channels), got {len(values)}")


class Normalise(nn.Module):
    """``(x - mean) / std`` per channel; the statistics are configuration, not weights (no state dict entry)."""

    def __init__(self, mean, std, in_chans: int):
        super().__init__()
        mean, std = channel_values(mean, in_chans, "input_mean"), channel_values(std, in_chans, "input_std")
        if min(std) <= 0:
            raise ValueError(f"input_std: every value must be positive, got {std}")
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean.to(x.dtype)) / self.std.to(x.dtype)
