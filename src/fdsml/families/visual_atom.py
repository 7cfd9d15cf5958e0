"""VisualAtom (Takashima et al., CVPR 2023): sinusoidal waves drawn as noisy concentric orbits.

Per class: vertices V ~ U{200..1000}, orbits K ~ U{1..200}, Perlin amplitude A ~ U(0, 4), line
width l ~ U(0, 0.1), starting radius r ~ U(10, 60), wave frequencies n1 ~ U{0..20} and n2 ~
U{0..20} with n2 != n1 unless n1 = 0, oval ratios o_x, o_y ~ U(1, 2). The original script draws
r as an integer; we draw it continuously, like the other continuous parameters, so that its
perturbation is continuous too.

Per instance: one of A, l, r, o_x, o_y rescaled (:mod:`fdsml.families.parameters`), the centre
~ U(0, 512)^2 in reference pixels (the original's (512 + U{-512..512}) / 2), and, from the
rendering seed, the noise curves and one grey level per orbit (1..255, never the black
background). The orbit geometry, with noise gain 1, is :mod:`fdsml.families.orbits`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from fdsml.config import ConfigError, require_range
from fdsml.families.orbits import drawn_fraction, render_orbits
from fdsml.families.parameters import check_orbit_settings, minmax, rescale_one

BACKGROUND = 0
GREYS = (1, 255)
NOISE_GAIN = 1.0
CONTINUOUS = ("amplitude", "line_width", "radius", "oval_x", "oval_y")
"""The class parameters an instance may rescale; the integers (V, K, n1, n2) are kept."""


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
    """A class's parameters after perturbation, its centre, and which parameter was rescaled by what."""

    centre_x: float
    centre_y: float
    perturbed: str
    factor: float


@dataclass(frozen=True)
class VisualAtom:
    """The VisualAtom family with its documented ranges (defaults: the original script's)."""

    vertices: tuple[int, int] = (200, 1000)
    orbits: tuple[int, int] = (1, 200)
    amplitude: tuple[float, float] = (0.0, 4.0)
    line_width: tuple[float, float] = (0.0, 0.1)
    radius: tuple[float, float] = (10.0, 60.0)
    frequency: tuple[int, int] = (0, 20)
    oval: tuple[float, float] = (1.0, 2.0)
    centre: tuple[float, float] = (0.0, 512.0)
    factor_range: tuple[float, float] = (0.6, 1.4)
    noise_cells: int = 32
    stroke: float = 1.0

    def __post_init__(self):
        check_orbit_settings(self)
        require_range("frequency", self.frequency, within=(0, math.inf))
        if self.frequency[0] == self.frequency[1] != 0:
            raise ConfigError(
                f"frequency: [{self.frequency[0]}, {self.frequency[1]}] leaves no n2 != n1; "
                "give at least two values, e.g. [0, 20], or [0, 0] for no wave"
            )

    def ranges(self) -> dict[str, tuple[float, float]]:
        """The documented range of every class-defining parameter, in descriptor order."""
        return {
            "vertices": self.vertices,
            "orbits": self.orbits,
            "amplitude": self.amplitude,
            "line_width": self.line_width,
            "radius": self.radius,
            "n1": self.frequency,
            "n2": self.frequency,
            "oval_x": self.oval,
            "oval_y": self.oval,
        }

    def sample_class(self, rng: np.random.Generator) -> AtomClass:
        """One class: every parameter drawn from its range (n2 from the values other than n1 when n1 > 0)."""
        low, high = self.frequency
        n1 = int(rng.integers(low, high + 1))
        if n1 == 0:
            n2 = int(rng.integers(low, high + 1))
        else:
            n2 = int(rng.integers(low, high))
            n2 += n2 >= n1
        return AtomClass(
            vertices=int(rng.integers(self.vertices[0], self.vertices[1] + 1)),
            orbits=int(rng.integers(self.orbits[0], self.orbits[1] + 1)),
            amplitude=float(rng.uniform(*self.amplitude)),
            line_width=float(rng.uniform(*self.line_width)),
            radius=float(rng.uniform(*self.radius)),
            n1=n1,
            n2=n2,
            oval_x=float(rng.uniform(*self.oval)),
            oval_y=float(rng.uniform(*self.oval)),
        )

    def perturb(self, shape: AtomClass, rng: np.random.Generator) -> AtomInstance:
        """One instance of ``shape``: one continuous parameter rescaled, and a centre."""
        perturbed, name, factor = rescale_one(shape, CONTINUOUS, self.ranges(), self.factor_range, rng)
        centre_x, centre_y = (float(c) for c in rng.uniform(self.centre[0], self.centre[1], size=2))
        return AtomInstance(**asdict(perturbed), centre_x=centre_x, centre_y=centre_y, perturbed=name, factor=factor)

    def render(self, instance: AtomInstance, size: int, seed: int) -> np.ndarray:
        """The instance as a ``(size, size)`` uint8 image, grey orbits on black."""
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
            n1=instance.n1,
            n2=instance.n2,
            centre_x=instance.centre_x,
            centre_y=instance.centre_y,
        )

    def descriptor(self, instance: AtomClass) -> np.ndarray:
        """The nine class-defining parameters after perturbation, min-max scaled to [0, 1] (float32)."""
        return minmax(instance, self.ranges())

    @staticmethod
    def occupancy(image: np.ndarray) -> float:
        """Fraction of drawn (non-black) pixels."""
        return drawn_fraction(image, BACKGROUND)
