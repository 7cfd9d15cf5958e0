"""RCDB (Kataoka et al., CVPR 2022): radial contours drawn as noisy concentric orbits.

Per class: vertices V, an exponential draw with mean 100 floored and kept in 3..200 (the
original redraws until it lands there; we invert the exponential's CDF restricted to [3, 201),
the same distribution in one draw), orbits K ~ U{1..200}, Perlin amplitude A ~ U(0, 4), line
width l ~ U(0, 0.1).

Per instance: one of A, l rescaled (:mod:`fdsml.families.parameters`); starting radius r ~
U(0, 100) (an integer in the original, continuous here), oval ratios o_x, o_y ~ U(1, 2), the
centre ~ U(56, 456)^2 in reference pixels (the original's (512 + U{-400..400}) / 2), and, from
the rendering seed, the noise curves and one grey level per orbit (0..254, never the white
background). The orbit geometry, with noise gain 2 and no wave (n1 = n2 = 0), is
:mod:`fdsml.families.orbits`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from fdsml.config import require_positive
from fdsml.families.orbits import Style, drawn_fraction, render_instance
from fdsml.families.parameters import OrbitSettings, middle, minmax, rescale_one, rescaled

STYLE = Style(background=255, greys=(0, 254), noise_gain=2.0)
CONTINUOUS = ("amplitude", "line_width")
"""The class parameters an instance may rescale; the integers (V, K) are kept."""


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


def ranges(settings: RCDBSettings) -> dict[str, tuple[float, float]]:
    """The documented range of every class-defining parameter, in descriptor order."""
    return {"vertices": settings.vertices, "orbits": settings.orbits, "amplitude": settings.amplitude, "line_width": settings.line_width}


def sample_vertices(rng: np.random.Generator, settings: RCDBSettings) -> int:
    """floor(E), E exponential with mean ``vertices_mean``, conditioned on floor(E) in ``vertices``."""
    low, high = settings.vertices
    top = math.exp(-low / settings.vertices_mean)
    bottom = math.exp(-(high + 1) / settings.vertices_mean)
    draw = -settings.vertices_mean * math.log(top - rng.uniform() * (top - bottom))
    return int(min(max(math.floor(draw), low), high))


def sample_class(rng: np.random.Generator, settings: RCDBSettings) -> ContourClass:
    """One class: every parameter drawn from its range."""
    return ContourClass(
        vertices=sample_vertices(rng, settings),
        orbits=int(rng.integers(settings.orbits[0], settings.orbits[1] + 1)),
        amplitude=float(rng.uniform(*settings.amplitude)),
        line_width=float(rng.uniform(*settings.line_width)),
    )


def perturb(shape: ContourClass, rng: np.random.Generator, settings: RCDBSettings) -> ContourInstance:
    """One instance of ``shape``: one continuous parameter rescaled; radius, ovals and centre drawn."""
    perturbed, name, factor = rescale_one(shape, CONTINUOUS, ranges(settings), settings.factor_range, rng)
    radius = float(rng.uniform(*settings.radius))
    ovals = tuple(float(o) for o in rng.uniform(settings.oval[0], settings.oval[1], size=2))
    centre = tuple(float(c) for c in rng.uniform(settings.centre[0], settings.centre[1], size=2))
    return _instance(perturbed, name, factor, getattr(shape, name), radius, ovals, centre)


def rescaled_instance(shape: ContourClass, name: str, factor: float, settings: RCDBSettings) -> tuple[ContourInstance, bool]:
    """``shape`` with ``name`` times ``factor`` (unclipped) and whether it stays in range; the
    instance-level draws take the middles of their ranges (sweeps)."""
    scaled, valid = rescaled(shape, name, factor, ranges(settings))
    oval, centre = middle(settings.oval), middle(settings.centre)
    return _instance(scaled, name, factor, getattr(shape, name), middle(settings.radius), (oval, oval), (centre, centre)), valid


def _instance(params: ContourClass, name: str, factor: float, class_value: float, radius: float, ovals, centre):
    return ContourInstance(
        **asdict(params),
        radius=radius,
        oval_x=ovals[0],
        oval_y=ovals[1],
        centre_x=centre[0],
        centre_y=centre[1],
        perturbed=name,
        factor=factor,
        class_value=float(class_value),
    )


def class_of(instance: ContourInstance) -> ContourClass:
    """The class an instance was drawn from: its perturbation undone."""
    values = {field.name: getattr(instance, field.name) for field in fields(ContourClass)}
    return ContourClass(**{**values, instance.perturbed: instance.class_value})


def render(instance: ContourInstance, settings, seed: int, size: int | None = None) -> np.ndarray:
    """The instance as a ``(size, size)`` uint8 image (``settings.size`` by default), grey orbits on white."""
    return render_instance(instance, STYLE, settings, seed, size)


def descriptor(instance: ContourClass, settings: RCDBSettings) -> np.ndarray:
    """The four class-defining parameters after perturbation, min-max scaled to [0, 1] (float32)."""
    return minmax(instance, ranges(settings))


def occupancy(image: np.ndarray) -> float:
    """Fraction of drawn (non-white) pixels."""
    return drawn_fraction(image, STYLE.background)
