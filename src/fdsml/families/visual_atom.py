"""VisualAtom (Takashima et al., CVPR 2023): sinusoidal waves drawn as noisy concentric orbits.

Per class: vertices V ~ U{200..1000}, orbits K ~ U{1..200}, Perlin amplitude A ~ U(0, 4), line
width l ~ U(0, 0.1), starting radius r ~ U(10, 60), wave frequencies n1 ~ U{0..20} and n2 ~
U{0..20} with n2 != n1 unless n1 = 0, oval ratios o_x, o_y ~ U(1, 2). The original script draws
r as an integer; we draw it continuously, like the other continuous parameters, so that its
perturbation is continuous too.

Per instance: one of A, l, r, o_x, o_y rescaled (:mod:`fdsml.families.orbit_family`), the centre
~ U(0, 512)^2 in reference pixels (the original's (512 + U{-512..512}) / 2), and, from the
rendering seed, the noise curves and one grey level per orbit (1..255, never the black
background). The orbit geometry, with noise gain 1, is :mod:`fdsml.families.orbits`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fdsml.config import ConfigError, require_range
from fdsml.families import register_family
from fdsml.families.orbit_family import OrbitFamily, OrbitSettings, middle
from fdsml.families.orbits import Style


@dataclass(frozen=True)
class VisualAtomSettings(OrbitSettings):
    """VisualAtom's settings; the ranges default to the original script's."""

    vertices: tuple[int, int] = (200, 1000)
    radius: tuple[float, float] = (10.0, 60.0)
    centre: tuple[float, float] = (0.0, 512.0)
    frequency: tuple[int, int] = (0, 20)

    def __post_init__(self):
        super().__post_init__()
        require_range("frequency", self.frequency, within=(0, math.inf))
        if self.frequency[0] == self.frequency[1] != 0:
            raise ConfigError(
                f"frequency: [{self.frequency[0]}, {self.frequency[1]}] leaves no n2 != n1; "
                "give at least two values, e.g. [0, 20], or [0, 0] for no wave"
            )


@dataclass(frozen=True)
class AtomClass:
    """The class-defining parameters of one VisualAtom class."""

    vertices: int
    orbits: int
    amplitude: float
    line_width: float
    radius: float
    n1: int
    n2: int
    oval_x: float
    oval_y: float


@dataclass(frozen=True)
class AtomInstance(AtomClass):
    """A class's parameters after perturbation, its centre, and the rescaling: parameter
    ``perturbed`` had value ``class_value`` in the class and was multiplied by ``factor`` (then clipped)."""

    centre_x: float
    centre_y: float
    perturbed: str
    factor: float
    class_value: float


class VisualAtom(OrbitFamily):
    name = "visual_atom"
    title = "VisualAtom"
    settings_type = VisualAtomSettings
    class_type = AtomClass
    instance_type = AtomInstance
    continuous = ("amplitude", "line_width", "radius", "oval_x", "oval_y")
    style = Style(background=0, greys=(1, 255), noise_gain=1.0)

    def ranges(self, settings: VisualAtomSettings) -> dict[str, tuple[float, float]]:
        return {
            "vertices": settings.vertices,
            "orbits": settings.orbits,
            "amplitude": settings.amplitude,
            "line_width": settings.line_width,
            "radius": settings.radius,
            "n1": settings.frequency,
            "n2": settings.frequency,
            "oval_x": settings.oval,
            "oval_y": settings.oval,
        }

    def draw_class(self, rng: np.random.Generator, settings: VisualAtomSettings) -> AtomClass:
        """Every parameter from its range; n2 among the values other than n1 when n1 > 0."""
        low, high = settings.frequency
        n1 = int(rng.integers(low, high + 1))
        if n1 == 0:
            n2 = int(rng.integers(low, high + 1))
        else:
            n2 = int(rng.integers(low, high))
            n2 += n2 >= n1
        return AtomClass(
            vertices=int(rng.integers(settings.vertices[0], settings.vertices[1] + 1)),
            orbits=int(rng.integers(settings.orbits[0], settings.orbits[1] + 1)),
            amplitude=float(rng.uniform(*settings.amplitude)),
            line_width=float(rng.uniform(*settings.line_width)),
            radius=float(rng.uniform(*settings.radius)),
            n1=n1,
            n2=n2,
            oval_x=float(rng.uniform(*settings.oval)),
            oval_y=float(rng.uniform(*settings.oval)),
        )

    def instance_draws(self, rng: np.random.Generator | None, settings: VisualAtomSettings) -> dict[str, float]:
        """The centre."""
        if rng is None:
            return {"centre_x": middle(settings.centre), "centre_y": middle(settings.centre)}
        centre_x, centre_y = (float(c) for c in rng.uniform(settings.centre[0], settings.centre[1], size=2))
        return {"centre_x": centre_x, "centre_y": centre_y}


VISUAL_ATOM = register_family(VisualAtom())
