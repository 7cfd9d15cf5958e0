"""What the orbit families (VisualAtom, RCDB) share: their settings, one-parameter rescaling, descriptors.

An instance rescales one continuous class parameter, the analogue of FineFractalDB's rescaling
of one coefficient position: the parameter is drawn uniformly among the family's continuous
ones, multiplied by s ~ U[factor_range] and clipped to its documented range; integer
parameters are kept as they are. The descriptor lists the class-defining parameters after
this perturbation, each min-max scaled by its range to [0, 1], so distances weigh them evenly.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from fdsml import reuse
from fdsml.config import ConfigError, require_fraction, require_positive, require_range, require_seed


@dataclass(frozen=True)
class OrbitSettings:
    """Settings of an orbit family: the dataset's size and rejection rules, the parameters' ranges
    (in reference pixels of a 512 x 512 image, :mod:`fdsml.families.orbits`) and the rendering.

    Each family module sets its own default ranges (the original scripts'). ``size`` is the side
    of the rendered images; ``stroke`` the drawn line thickness in reference pixels; ``noise_cells``
    the Perlin lattice cells around one orbit.
    """

    seed: int = 0
    n_classes: int = 10
    instances_per_class: int = 20
    size: int = 64
    min_occupancy: float = 0.0005
    max_class_replacements: int = 10
    max_attempts: int = 100
    vertices: tuple[int, int] = (3, 200)
    orbits: tuple[int, int] = (1, 200)
    amplitude: tuple[float, float] = (0.0, 4.0)
    line_width: tuple[float, float] = (0.0, 0.1)
    radius: tuple[float, float] = (0.0, 100.0)
    oval: tuple[float, float] = (1.0, 2.0)
    centre: tuple[float, float] = (0.0, 512.0)
    factor_range: tuple[float, float] = (0.6, 1.4)
    noise_cells: int = 32
    stroke: float = 1.0
    workers: int = reuse.non_defining(default=1)

    def __post_init__(self):
        require_seed("seed", self.seed)
        for name in ("n_classes", "instances_per_class", "size", "max_attempts", "noise_cells", "stroke", "workers"):
            require_positive(name, getattr(self, name))
        require_fraction("min_occupancy", self.min_occupancy)
        if self.max_class_replacements < 0:
            raise ConfigError(f"max_class_replacements: must be >= 0, got {self.max_class_replacements}")
        require_range("vertices", self.vertices, within=(3, math.inf))
        require_range("orbits", self.orbits, within=(1, math.inf))
        for name in ("amplitude", "line_width", "radius", "oval"):
            require_range(name, getattr(self, name), within=(0.0, math.inf))
        require_positive("oval[0]", self.oval[0])
        require_range("centre", self.centre)
        require_range("factor_range", self.factor_range)
        require_positive("factor_range[0]", self.factor_range[0])


def rescaled(params, name: str, factor: float, ranges: dict):
    """``params`` with ``name`` multiplied by ``factor``, unclipped, and whether it stays in its range."""
    low, high = ranges[name]
    value = float(getattr(params, name) * factor)
    return dataclasses.replace(params, **{name: value}), bool(low <= value <= high)


def rescale_one(params, names: tuple[str, ...], ranges: dict, factor_range: tuple[float, float], rng):
    """``params`` with one of ``names`` multiplied by s ~ U[factor_range], clipped to its range.

    Returns the new parameters, the name rescaled and s.
    """
    name = names[int(rng.integers(len(names)))]
    factor = float(rng.uniform(factor_range[0], factor_range[1]))
    low, high = ranges[name]
    value = float(np.clip(getattr(params, name) * factor, low, high))
    return dataclasses.replace(params, **{name: value}), name, factor


def minmax(params, ranges: dict) -> np.ndarray:
    """The parameters named in ``ranges``, in its order, each scaled to [0, 1] by its range (float32)."""
    values = []
    for name, (low, high) in ranges.items():
        span = high - low
        values.append((getattr(params, name) - low) / span if span > 0 else 0.0)
    return np.asarray(values, dtype=np.float32)


def middle(bounds: tuple[float, float]) -> float:
    """The middle of a range: the value an instance-level draw takes where none is drawn (sweeps)."""
    return (bounds[0] + bounds[1]) / 2.0
