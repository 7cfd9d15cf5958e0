"""What the orbit families (VisualAtom, RCDB) share: their settings and the family interface over them.

An instance rescales one continuous class parameter, the analogue of FineFractalDB's rescaling
of one coefficient position: the parameter is drawn uniformly among the family's continuous
ones, multiplied by s ~ U[factor_range] and clipped to its documented range; integer
parameters are kept as they are. The family's own per-instance draws follow (the centre, and
for RCDB the radius and ovals). The descriptor lists the class-defining parameters after this
perturbation, each min-max scaled by its range to [0, 1], so distances weigh them evenly.
Renderings are never invalid; nearly empty ones are rejected by occupancy.
"""

from __future__ import annotations

import dataclasses
import math
from abc import abstractmethod
from collections import Counter
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from fdsml import fingerprints
from fdsml.config import ConfigError, require_fraction, require_positive, require_range, require_seed
from fdsml.families.base import GENERIC_COLUMNS, Family, scale_descriptor
from fdsml.families.orbits import Style, render_instance

_CASTS = {"int": int, "float": float, "str": str}
_PERTURBATION_RECORD = ("perturbed", "factor", "class_value")


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
    workers: int = fingerprints.non_defining(default=1)

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


def middle(bounds: tuple[float, float]) -> float:
    """The middle of a range: the value an instance-level draw takes where none is drawn (sweeps)."""
    return (bounds[0] + bounds[1]) / 2.0


class OrbitFamily(Family):
    """The family interface over an orbit family's dataclasses; a subclass names them, its
    continuous parameters, its style and ranges, and draws its classes and per-instance values."""

    class_type: ClassVar[type]
    instance_type: ClassVar[type]
    continuous: ClassVar[tuple[str, ...]]
    style: ClassVar[Style]

    @abstractmethod
    def ranges(self, settings) -> dict[str, tuple[float, float]]:
        """The documented range of every class-defining parameter, in descriptor order."""

    @abstractmethod
    def draw_class(self, rng: np.random.Generator, settings) -> Any:
        """One class: every class-defining parameter drawn from its range."""

    @abstractmethod
    def instance_draws(self, rng: np.random.Generator | None, settings) -> dict[str, float]:
        """The per-instance values (centre, ...) drawn from ``rng``, or the middles of their ranges without one."""

    def image_size(self, settings) -> int:
        return settings.size

    def max_instance_attempts(self, settings) -> int:
        return settings.max_attempts

    def sample_class(self, rng, settings, counts: Counter):
        counts["codes_sampled"] += 1
        return self.draw_class(rng, settings)

    def perturb(self, class_code, rng, settings):
        """One instance: one continuous parameter rescaled and clipped, then the per-instance draws."""
        perturbed, name, factor = rescale_one(class_code, self.continuous, self.ranges(settings), settings.factor_range, rng)
        return self._instance(perturbed, name, factor, getattr(class_code, name), self.instance_draws(rng, settings))

    def rescaled(self, class_code, parameter: int, factor: float, settings):
        """Continuous parameter ``parameter`` times ``factor``, unclipped (valid while in its range); the
        per-instance values at the middles of their ranges."""
        name = self.continuous[parameter]
        scaled, valid = rescaled(class_code, name, factor, self.ranges(settings))
        return self._instance(scaled, name, factor, getattr(class_code, name), self.instance_draws(None, settings)), valid

    def perturbation_range(self, settings) -> tuple[float, float]:
        return tuple(settings.factor_range)

    def perturbed_parameter(self, instance) -> int:
        return self.continuous.index(instance.perturbed)

    def interpolated(self, instance_0, instance_1, alpha: float, settings):
        """Every number on the straight line (integers rounded); the first instance's perturbation record."""
        values = {}
        for field in fields(self.instance_type):
            first, second = getattr(instance_0, field.name), getattr(instance_1, field.name)
            value = (1.0 - alpha) * first + alpha * second if field.name not in _PERTURBATION_RECORD else first
            values[field.name] = int(round(value)) if field.type == "int" else value
        return self.instance_type(**values)

    def _instance(self, params, name: str, factor: float, class_value: float, draws: dict):
        return self.instance_type(**asdict(params), **draws, perturbed=name, factor=factor, class_value=float(class_value))

    def class_of(self, instance):
        """The class an instance was drawn from: its perturbation undone."""
        values = {field.name: getattr(instance, field.name) for field in fields(self.class_type)}
        return self.class_type(**{**values, instance.perturbed: instance.class_value})

    def render(self, instance, settings, seed: int, size: int | None = None) -> np.ndarray:
        """The instance as a ``(size, size)`` uint8 image, ``settings.size`` by default."""
        return render_instance(instance, self.style, settings, seed, size)

    def fuzzed(self, instance, rng: np.random.Generator, settings):
        """About half the continuous parameters replaced by values of either sign up to 1e3 (their ranges end near 1e2),
        rendered at a size from 8 to 48 pixels."""
        extreme = {
            name: float(rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-3.0, 3.0)) for name in self.continuous if rng.random() < 0.5
        }
        return dataclasses.replace(instance, **extreme), dataclasses.replace(settings, size=int(rng.integers(8, 49)))

    def foreground(self, images: np.ndarray, settings) -> np.ndarray:
        """The pixels that differ from the family's background."""
        return images != self.style.background

    def descriptor(self, instance, settings) -> np.ndarray:
        ranges = self.ranges(settings)
        return scale_descriptor([getattr(instance, name) for name in ranges], list(ranges.values()))

    def descriptor_names(self, settings) -> tuple[str, ...]:
        return tuple(self.ranges(settings))

    def sweep_parameters(self, settings) -> tuple[str, ...]:
        return self.continuous

    def table_columns(self, settings) -> tuple[str, ...]:
        own = tuple(field.name for field in fields(self.instance_type))
        return GENERIC_COLUMNS[:2] + own + GENERIC_COLUMNS[2:]

    def instance_row(self, instance, settings) -> dict:
        return asdict(instance)

    def instance(self, row):
        return self.instance_type(**{field.name: _CASTS[field.type](row[field.name]) for field in fields(self.instance_type)})

    def class_code(self, rows, settings):
        return self.class_of(self.instance(rows.iloc[0]))

    def describe(self, settings) -> dict[str, str]:
        return {
            **super().describe(settings),
            "instance perturbation": f"one of {', '.join(self.continuous)} x U{list(settings.factor_range)}, clipped to its range",
            "rendering": f"stroke {settings.stroke} px at 512, {settings.noise_cells} Perlin cells per orbit",
        }
