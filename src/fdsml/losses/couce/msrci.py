"""MSRCI: the multi-scale random amplitude intervention on the Stage-1 feature map (docs/method.md §7.2)."""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from fdsml.config import ConfigError

BAND_SCHEDULES = ("uniform", "linear", "exponential", "custom")


def frequency_band_edges(schedule: str, n_bands: int, custom: tuple[float, ...] | None = None) -> tuple[float, ...]:
    """Upper edges of ``n_bands`` bands on the normalised frequency radius [0, 1] (the last is 1).

    Band widths are proportional to 1 (``uniform``), to k = 1..S (``linear``) or to 2^(k-1)
    (``exponential``): the latter two give the low frequencies narrower bands. ``custom``
    takes ``custom`` as given (strictly increasing, ending at 1).
    """
    if schedule not in BAND_SCHEDULES:
        raise ConfigError(f"band_schedule: {schedule!r} is not accepted; choose one of {', '.join(BAND_SCHEDULES)}")
    if schedule == "custom":
        if custom is None or len(custom) != n_bands:
            raise ConfigError(f"band_edges: the custom schedule needs {n_bands} upper edges (one per gamma), got {custom!r}")
        if not 0 < custom[0] or any(b <= a for a, b in zip(custom, custom[1:])) or custom[-1] != 1.0:
            raise ConfigError(f"band_edges: must increase strictly inside (0, 1] and end at 1.0, got {custom!r}")
        return tuple(float(edge) for edge in custom)
    if custom is not None:
        raise ConfigError(f"band_edges: only used with band_schedule custom, not {schedule!r}")
    width = {"uniform": lambda k: 1.0, "linear": lambda k: k + 1.0, "exponential": lambda k: 2.0**k}[schedule]
    cumulative = list(itertools.accumulate(width(k) for k in range(n_bands)))
    return (*(edge / cumulative[-1] for edge in cumulative[:-1]), 1.0)


def frequency_radius(height: int, width: int, device: torch.device | None = None) -> torch.Tensor:
    """(H, W) radius of each FFT bin's frequency, normalised so that DC is 0 and the (Nyquist, Nyquist) corner 1.

    Symmetric under f -> -f, so a radius-dependent real factor keeps the spectrum Hermitian.
    """
    fy = torch.fft.fftfreq(height, device=device, dtype=torch.float64).abs()
    fx = torch.fft.fftfreq(width, device=device, dtype=torch.float64).abs()
    return (torch.sqrt(fy[:, None] ** 2 + fx[None, :] ** 2) / math.sqrt(0.5)).float()


def band_index(radius: torch.Tensor, edges: tuple[float, ...]) -> torch.Tensor:
    """The band (0 = lowest) of every frequency bin: band s holds edges[s-1] < r <= edges[s]."""
    inner = torch.tensor(edges[:-1], dtype=radius.dtype, device=radius.device)
    return torch.bucketize(radius, inner)


def amplitude_scales(
    gammas: torch.Tensor, batch: int, channels: int, generator: torch.Generator | None, min_scale: float
) -> torch.Tensor:
    """(B, C, S) factors 1 + gamma_s dA_s, dA_s ~ U(-1, 1) per sample, channel and band, floored at ``min_scale``.

    The factor lies in [1 - gamma, 1 + gamma]: the floor acts only when gamma > 1 - ``min_scale``.
    """
    delta = torch.rand(batch, channels, gammas.numel(), generator=generator, device=gammas.device) * 2 - 1
    return (1 + gammas * delta).clamp_min(min_scale)


def scale_amplitude(h: torch.Tensor, scales: torch.Tensor, bands: torch.Tensor) -> torch.Tensor:
    """real(iFFT2(A * factor * exp(j Phi))) per channel: amplitude scaled band by band, phase kept.

    ``scales`` (B, C, S) are positive reals, so multiplying the complex spectrum by them scales
    its modulus and leaves its argument unchanged.
    """
    spectrum = torch.fft.fft2(h)
    return torch.fft.ifft2(spectrum * scales[..., bands]).real


class MSRCI(nn.Module):
    """Multi-scale random amplitude intervention on a (B, C, H, W) feature map; the identity in eval mode.

    Per sample, channel and band, the amplitude of every frequency in the band is multiplied by
    1 + gamma_s dA_s with dA_s ~ U(-1, 1) (see :func:`amplitude_scales`); bands are concentric in
    the normalised frequency radius (:func:`frequency_band_edges`). Computed in float32 (FFTs have no
    bfloat16), returned in the input's dtype.
    """

    def __init__(
        self,
        gammas: tuple[float, ...] = (0.2, 0.4, 0.8),
        schedule: str = "uniform",
        band_edges: tuple[float, ...] | None = None,
        min_scale: float = 0.05,
    ):
        super().__init__()
        self.edges = frequency_band_edges(schedule, len(gammas), band_edges)
        self.register_buffer("gammas", torch.tensor(gammas, dtype=torch.float32), persistent=False)
        self.min_scale = min_scale

    def forward(self, h: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        if not self.training:
            return h
        batch, channels, height, width = h.shape
        bands = band_index(frequency_radius(height, width, h.device), self.edges)
        with torch.autocast(device_type=h.device.type, enabled=False):
            scales = amplitude_scales(self.gammas.to(h.device), batch, channels, generator, self.min_scale)
            return scale_amplitude(h.float(), scales, bands).to(h.dtype)
