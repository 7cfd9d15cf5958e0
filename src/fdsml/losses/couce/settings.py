"""CouCE's settings: every switch and hyper-parameter, docs/method.md §7's defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fdsml.config import ConfigError, require_fraction, require_positive
from fdsml.losses.couce.msrci import frequency_band_edges
from fdsml.losses.couce.stage_split import parse_split_point


@dataclass(frozen=True)
class CouCESettings:
    """Every CouCE switch and hyper-parameter; the defaults are docs/method.md §7's.

    Modules: ``msrci`` (intervention + L_inv), ``odba`` (L_orth), ``decorrelation`` (L_cov).
    ``split_at``: ``"auto"`` (ResNet: after layer3; ViT: after block 3/4 of the depth),
    ``"layer2"``..``"layer4"`` or ``"blocks.<i>"`` (0-based, inclusive).
    ``band_schedule`` lays out the band edges on the normalised frequency radius (see
    :func:`frequency_band_edges`); ``band_edges`` (upper edges, the last 1.0) only with ``"custom"``.
    ``min_scale`` floors the amplitude factor ``1 + gamma dA`` (it acts only when gamma > 1 - min_scale).
    ``gate_tau``/``gate_delta`` are tau_g/delta of the variance gate; ``orthogonality`` is
    ``"soft"`` (the L_orth penalty) or ``"hard"`` (L_DML sees ``m`` with ``z`` projected out).
    """

    msrci: bool = True
    odba: bool = True
    decorrelation: bool = True
    split_at: str = "auto"
    gammas: tuple[float, ...] = (0.2, 0.4, 0.8)
    band_schedule: Literal["uniform", "linear", "exponential", "custom"] = "uniform"
    band_edges: tuple[float, ...] | None = None
    min_scale: float = 0.05
    temperature: float = 0.1
    stop_gradient: bool = True
    momentum: float = 0.999
    gate: bool = True
    gate_tau: float = 1.0
    gate_delta: float = 1e-4
    dictionary_size: int = 2048
    detach: bool = True
    orthogonality: Literal["soft", "hard"] = "soft"
    lambda_orth: float = 0.05
    lambda_inv: float = 0.1
    lambda_cov: float = 0.04
    eps: float = 1e-8

    def __post_init__(self):
        if not self.gammas:
            raise ConfigError("gammas: give at least one band strength")
        for gamma in self.gammas:
            require_positive("gammas", gamma)
        frequency_band_edges(self.band_schedule, len(self.gammas), self.band_edges)
        parse_split_point(self.split_at)
        require_fraction("min_scale", self.min_scale, inclusive_zero=False)
        require_positive("temperature", self.temperature)
        if not 0.0 <= self.momentum < 1.0:
            raise ConfigError(f"momentum: must lie in [0, 1), got {self.momentum!r}")
        if self.gate_delta < 0:
            raise ConfigError(f"gate_delta: must be >= 0, got {self.gate_delta!r}")
        require_positive("dictionary_size", self.dictionary_size)
        for name in ("lambda_orth", "lambda_inv", "lambda_cov"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        require_positive("eps", self.eps)

    @classmethod
    def baseline(cls, **overrides: Any) -> CouCESettings:
        """Every module off: the objective is then the plain proxy loss."""
        return cls(**{"msrci": False, "odba": False, "decorrelation": False, **overrides})
