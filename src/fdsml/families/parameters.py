"""Parameter helpers of the orbit families: range checks, one-parameter rescaling, min-max descriptors.

An instance rescales one continuous class parameter, the analogue of FineFractalDB's rescaling
of one coefficient position: the parameter is drawn uniformly among the family's continuous
ones, multiplied by s ~ U[factor_range] and clipped to its documented range; integer
parameters are kept as they are. The descriptor lists the class-defining parameters after
this perturbation, each min-max scaled by its range to [0, 1], so distances weigh them evenly.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fdsml.config import require_positive, require_range


def check_orbit_settings(settings) -> None:
    """Validate the settings both orbit families share; a ConfigError names the key."""
    require_range("vertices", settings.vertices, within=(3, math.inf))
    require_range("orbits", settings.orbits, within=(1, math.inf))
    for name in ("amplitude", "line_width", "radius", "oval"):
        require_range(name, getattr(settings, name), within=(0.0, math.inf))
    require_positive("oval[0]", settings.oval[0])
    require_range("centre", settings.centre)
    require_range("factor_range", settings.factor_range)
    require_positive("factor_range[0]", settings.factor_range[0])
    require_positive("noise_cells", settings.noise_cells)
    require_positive("stroke", settings.stroke)


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
    """The parameters named in ``ranges``, in its order, each scaled to [0, 1] by its range."""
    values = []
    for name, (low, high) in ranges.items():
        span = high - low
        values.append((getattr(params, name) - low) / span if span > 0 else 0.0)
    return np.asarray(values, dtype=np.float32)
