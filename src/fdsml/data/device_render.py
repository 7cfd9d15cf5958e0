"""``pretrain.data.source: device``: the loader ships table rows and seeds, the training device renders.

Each item's "image" is its code packed into one int64 row, ``[seed, number of maps, thresholds
(M), coefficients as float64 bits (6 M)]`` with M the table's largest number of maps; the
dataset's ``model_input``, which the loop calls on the device (a batch ahead,
:mod:`fdsml.training.prefetch`), renders the batch there
(:func:`fdsml.ifs.render_triton.render_tensors` on a CUDA device, the Numba renderer on the CPU:
the same bytes) and converts it as every source does (:func:`fractal_input`).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch

from fdsml.data.fractal_dataset import FractalCodesDataset, fractal_input
from fdsml.families import FamilySpec
from fdsml.ifs.render import RenderSettings, map_thresholds, padded_maps, render_thresholds

logger = logging.getLogger(__name__)

DEVICE_FAMILY = "finefractaldb"
"""The family with a GPU kernel."""


def renders_on_device(spec: FamilySpec, instances: str) -> bool:
    """Whether ``source: device`` can render this family's items on the device; otherwise they are
    rendered in the loader (said once in the log)."""
    if spec.name == DEVICE_FAMILY and instances == "table":
        return True
    reason = f"family {spec.name!r} has no GPU kernel" if spec.name != DEVICE_FAMILY else "fresh instances are drawn and checked in the loader"
    logger.warning("pretrain.data.source: device renders on the CPU in the loader: %s", reason)
    return False


class DeviceRenderedCodes(FractalCodesDataset):
    """FineFractalDB table items shipped as packed codes (module docstring) and rendered in ``model_input``."""

    def __init__(self, table: pd.DataFrame, spec: FamilySpec, **kwargs):
        super().__init__(table, spec, instances="table", **kwargs)
        self.max_maps = padded_maps(int(table["n_maps"].max()))  # a power of two, as the kernels are compiled for

    def _image(self, index: int) -> tuple[np.ndarray, None]:
        instance = self.spec.instance(self.rows.row(index))
        maps = instance.coefficients.shape[0]
        packed = np.zeros(2 + 7 * self.max_maps, np.int64)
        packed[0], packed[1] = self.rendering_seed(index), maps
        packed[2 : 2 + maps] = map_thresholds(instance.probabilities)
        coefficients = np.zeros((self.max_maps, 6))
        coefficients[:maps] = instance.coefficients
        packed[2 + self.max_maps :] = coefficients.reshape(-1).view(np.int64)
        return packed[None, :], None

    def collated_items(self, indices: np.ndarray) -> dict:
        indices = np.asarray(indices, dtype=np.int64)
        packed = np.stack([self._image(int(index))[0] for index in indices])[:, None]
        return self._table.batch(indices, packed, self._table.psi[indices])

    def model_input(self, packed: torch.Tensor, kernel: bool | None = None) -> torch.Tensor:
        """The batch's packed codes, on any device, rendered there and converted (:func:`fractal_input`);
        ``kernel``: render with the Triton kernel (default: on a CUDA device; on the CPU it needs ``TRITON_INTERPRET=1``)."""
        images = render_packed(packed.reshape(packed.shape[0], -1), self.max_maps, self.spec.settings.render, kernel)
        return fractal_input(images[:, None], self.img_size, self.channels)


def unpacked(packed: torch.Tensor, max_maps: int) -> tuple[torch.Tensor, ...]:
    """``(n, 2 + 7 M)`` packed codes as :func:`fdsml.ifs.render_triton.render_tensors` takes them:
    coefficients ``(n, M, 6)`` float64, thresholds ``(n, M)``, numbers of maps, seeds."""
    coefficients = packed[:, 2 + max_maps :].contiguous().view(torch.float64).reshape(-1, max_maps, 6)
    return coefficients, packed[:, 2 : 2 + max_maps].contiguous(), packed[:, 1].contiguous(), packed[:, 0].contiguous()


def render_packed(packed: torch.Tensor, max_maps: int, settings: RenderSettings, kernel: bool | None = None) -> torch.Tensor:
    """``(n, 2 + 7 M)`` packed codes rendered into ``(n, S, S)`` uint8 images on their device: by the
    Triton kernel (``kernel``, by default on a CUDA device; it reads nothing back to the host) or Numba."""
    coefficients, thresholds, n_maps, seeds = unpacked(packed, max_maps)
    arguments = dict(size=settings.size, points=settings.points, mode=settings.mode, margin=settings.margin, burn_in=settings.burn_in, walkers=settings.walkers)
    if packed.is_cuda if kernel is None else kernel:
        from fdsml.ifs.render_triton import render_tensors

        return render_tensors(coefficients, thresholds, n_maps, seeds, **arguments)
    images = [
        render_thresholds(c[:maps].numpy(), t[:maps].numpy().astype(np.uint64), seed=int(seed), **arguments)
        for c, t, maps, seed in zip(coefficients, thresholds, n_maps.tolist(), seeds.tolist())
    ]
    return torch.from_numpy(np.stack(images)) if images else torch.zeros((0, settings.size, settings.size), dtype=torch.uint8)
