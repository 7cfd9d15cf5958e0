"""RCDB (Kataoka et al., CVPR 2022): radial contours drawn as noisy concentric orbits.

Per class: vertices V, an exponential draw with mean 100 floored and kept in 3..200 (the
original redraws until it lands there; we invert the exponential's CDF restricted to [3, 201),
the same distribution in one draw), orbits K ~ U{1..200}, Perlin amplitude A ~ U(0, 4), line
width l ~ U(0, 0.1).

Per instance: one of A, l rescaled (:mod:`fdsml.families.orbit_family`); starting radius r ~
U(0, 100) (an integer in the original, continuous here), oval ratios o_x, o_y ~ U(1, 2), the
centre ~ U(56, 456)^2 in reference pixels (the original's (512 + U{-400..400}) / 2), and, from
the rendering seed, the noise curves and one grey level per orbit (0..254, never the white
background). The orbit geometry, with noise gain 2 and no wave (n1 = n2 = 0), is
:mod:`fdsml.families.orbits`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fdsml.config import require_positive
from fdsml.families import register_family
from fdsml.families.orbit_family import OrbitFamily, OrbitSettings, middle
from fdsml.families.orbits import Style


@dataclass(frozen=True)
class RCDBSettings(OrbitSettings):
    """RCDB's settings; the ranges default to the original script's."""

    vertices_mean: float = 100.0
    vertices: tuple[int, int] = (3, 200)
    radius: tuple[float, float] = (0.0, 100.0)
    centre: tuple[float, float] = (56.0, 456.0)

    def __post_init__(self):
        super().__post_init__()
        require_positive("vertices_mean", self.vertices_mean)


@dataclass(frozen=True)
class ContourClass:
    """The class-defining parameters of one RCDB class."""

    vertices: int
    orbits: int
    amplitude: float
    line_width: float


@dataclass(frozen=True)
class ContourInstance(ContourClass):
    """A class's parameters after perturbation, the instance's own draws, and the rescaling: parameter
    ``perturbed`` had value ``class_value`` in the class and was multiplied by ``factor`` (then clipped)."""

    radius: float
    oval_x: float
    oval_y: float
    centre_x: float
    centre_y: float
    perturbed: str
    factor: float
    class_value: float


def sample_vertices(rng: np.random.Generator, settings: RCDBSettings) -> int:
    """floor(E), E exponential with mean ``vertices_mean``, conditioned on floor(E) in ``vertices``."""
    low, high = settings.vertices
    top = math.exp(-low / settings.vertices_mean)
    bottom = math.exp(-(high + 1) / settings.vertices_mean)
    draw = -settings.vertices_mean * math.log(top - rng.uniform() * (top - bottom))
    return int(min(max(math.floor(draw), low), high))


class RCDBFamily(OrbitFamily):
    name = "rcdb"
    title = "RCDB"
    settings_type = RCDBSettings
    class_type = ContourClass
    instance_type = ContourInstance
    continuous = ("amplitude", "line_width")
    style = Style(background=255, greys=(0, 254), noise_gain=2.0)

    def ranges(self, settings: RCDBSettings) -> dict[str, tuple[float, float]]:
        return {"vertices": settings.vertices, "orbits": settings.orbits, "amplitude": settings.amplitude, "line_width": settings.line_width}

    def draw_class(self, rng: np.random.Generator, settings: RCDBSettings) -> ContourClass:
        return ContourClass(
            vertices=sample_vertices(rng, settings),
            orbits=int(rng.integers(settings.orbits[0], settings.orbits[1] + 1)),
            amplitude=float(rng.uniform(*settings.amplitude)),
            line_width=float(rng.uniform(*settings.line_width)),
        )

    def instance_draws(self, rng: np.random.Generator | None, settings: RCDBSettings) -> dict[str, float]:
        """The starting radius, the oval ratios and the centre."""
        if rng is None:
            oval, centre = middle(settings.oval), middle(settings.centre)
            return {"radius": middle(settings.radius), "oval_x": oval, "oval_y": oval, "centre_x": centre, "centre_y": centre}
        radius = float(rng.uniform(*settings.radius))
        oval_x, oval_y = (float(o) for o in rng.uniform(settings.oval[0], settings.oval[1], size=2))
        centre_x, centre_y = (float(c) for c in rng.uniform(settings.centre[0], settings.centre[1], size=2))
        return {"radius": radius, "oval_x": oval_x, "oval_y": oval_y, "centre_x": centre_x, "centre_y": centre_y}


RCDB = register_family(RCDBFamily())
