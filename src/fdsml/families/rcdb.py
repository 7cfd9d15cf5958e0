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
from dataclasses import asdict, dataclass

import numpy as np

from fdsml.config import require_positive
from fdsml.families.orbits import drawn_fraction, render_orbits
from fdsml.families.parameters import check_orbit_settings, minmax, rescale_one

BACKGROUND = 255
GREYS = (0, 254)
NOISE_GAIN = 2.0
CONTINUOUS = ("amplitude", "line_width")
"""The class parameters an instance may rescale; the integers (V, K) are kept."""


@dataclass(frozen=True)
class ContourClass:
    """The class-defining parameters of one RCDB class."""

    vertices: int
    orbits: int
    amplitude: float
    line_width: float


@dataclass(frozen=True)
class ContourInstance(ContourClass):
    """A class's parameters after perturbation, the instance's own draws, and the rescaling applied."""

    radius: float
    oval_x: float
    oval_y: float
    centre_x: float
    centre_y: float
    perturbed: str
    factor: float


@dataclass(frozen=True)
class RCDB:
    """The RCDB family with its documented ranges (defaults: the original script's)."""

    vertices_mean: float = 100.0
    vertices: tuple[int, int] = (3, 200)
    orbits: tuple[int, int] = (1, 200)
    amplitude: tuple[float, float] = (0.0, 4.0)
    line_width: tuple[float, float] = (0.0, 0.1)
    radius: tuple[float, float] = (0.0, 100.0)
    oval: tuple[float, float] = (1.0, 2.0)
    centre: tuple[float, float] = (56.0, 456.0)
    factor_range: tuple[float, float] = (0.6, 1.4)
    noise_cells: int = 32
    stroke: float = 1.0

    def __post_init__(self):
        require_positive("vertices_mean", self.vertices_mean)
        check_orbit_settings(self)

    def ranges(self) -> dict[str, tuple[float, float]]:
        """The documented range of every class-defining parameter, in descriptor order."""
        return {"vertices": self.vertices, "orbits": self.orbits, "amplitude": self.amplitude, "line_width": self.line_width}

    def sample_vertices(self, rng: np.random.Generator) -> int:
        """floor(E), E exponential with mean ``vertices_mean``, conditioned on floor(E) in ``vertices``."""
        low, high = self.vertices
        top = math.exp(-low / self.vertices_mean)
        bottom = math.exp(-(high + 1) / self.vertices_mean)
        draw = -self.vertices_mean * math.log(top - rng.uniform() * (top - bottom))
        return int(min(max(math.floor(draw), low), high))

    def sample_class(self, rng: np.random.Generator) -> ContourClass:
        """One class: every parameter drawn from its range."""
        return ContourClass(
            vertices=self.sample_vertices(rng),
            orbits=int(rng.integers(self.orbits[0], self.orbits[1] + 1)),
            amplitude=float(rng.uniform(*self.amplitude)),
            line_width=float(rng.uniform(*self.line_width)),
        )

    def perturb(self, shape: ContourClass, rng: np.random.Generator) -> ContourInstance:
        """One instance of ``shape``: one continuous parameter rescaled; radius, ovals and centre drawn."""
        perturbed, name, factor = rescale_one(shape, CONTINUOUS, self.ranges(), self.factor_range, rng)
        radius = float(rng.uniform(*self.radius))
        oval_x, oval_y = (float(o) for o in rng.uniform(self.oval[0], self.oval[1], size=2))
        centre_x, centre_y = (float(c) for c in rng.uniform(self.centre[0], self.centre[1], size=2))
        return ContourInstance(
            **asdict(perturbed),
            radius=radius,
            oval_x=oval_x,
            oval_y=oval_y,
            centre_x=centre_x,
            centre_y=centre_y,
            perturbed=name,
            factor=factor,
        )

    def render(self, instance: ContourInstance, size: int, seed: int) -> np.ndarray:
        """The instance as a ``(size, size)`` uint8 image, grey orbits on white."""
        return render_orbits(
            size=size,
            seed=seed,
            background=BACKGROUND,
            greys=GREYS,
            noise_gain=NOISE_GAIN,
            noise_cells=self.noise_cells,
            stroke=self.stroke,
            vertices=instance.vertices,
            orbits=instance.orbits,
            amplitude=instance.amplitude,
            line_width=instance.line_width,
            radius=instance.radius,
            oval_x=instance.oval_x,
            oval_y=instance.oval_y,
            n1=0,
            n2=0,
            centre_x=instance.centre_x,
            centre_y=instance.centre_y,
        )

    def descriptor(self, instance: ContourClass) -> np.ndarray:
        """The four class-defining parameters after perturbation, min-max scaled to [0, 1] (float32)."""
        return minmax(instance, self.ranges())

    @staticmethod
    def occupancy(image: np.ndarray) -> float:
        """Fraction of drawn (non-white) pixels."""
        return drawn_fraction(image, BACKGROUND)
