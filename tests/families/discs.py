"""A tiny formula family defined outside ``fdsml`` (ellipses), used to prove that nothing else is family-specific.

A class code is a radius and an aspect ratio; an instance rescales both by factors in
[0.8, 1.25] and is valid while the ellipse fits the frame; the rendering seed jitters the
centre by up to one pixel.
"""

from collections import Counter
from dataclasses import dataclass

import numpy as np

from fdsml import fingerprints
from fdsml.families import Family, scale_descriptor

RANGES = ((0.1, 0.6), (0.4, 1.25))


@dataclass(frozen=True)
class DiscSettings:
    seed: int = 0
    n_classes: int = 4
    instances_per_class: int = 4
    size: int = 16
    min_occupancy: float = 0.02
    max_class_replacements: int = 2
    max_attempts: int = 30
    workers: int = fingerprints.non_defining(default=1)


class Discs(Family):
    name = "discs"
    title = "Discs"
    settings_type = DiscSettings

    def image_size(self, settings):
        return settings.size

    def max_instance_attempts(self, settings):
        return settings.max_attempts

    def sample_class(self, rng, settings, counts: Counter):
        counts["codes_sampled"] += 1
        return (float(rng.uniform(0.2, 0.45)), float(rng.uniform(0.5, 1.0)))

    def perturb(self, class_code, rng, settings):
        radius, aspect = (value * float(rng.uniform(0.8, 1.25)) for value in class_code)
        return (radius, aspect, *class_code) if radius <= 0.5 else None

    def render(self, instance, settings, seed):
        radius, aspect = instance[:2]
        jitter = np.random.default_rng(seed).uniform(-1.0, 1.0, size=2)
        centre = (settings.size - 1) / 2 + jitter
        y, x = np.mgrid[: settings.size, : settings.size]
        half = settings.size / 2
        inside = ((x - centre[0]) / (radius * half)) ** 2 + ((y - centre[1]) / (radius * aspect * half)) ** 2 <= 1.0
        return np.where(inside, 200, 0).astype(np.uint8)

    def descriptor(self, instance, settings):
        return scale_descriptor(instance[:2], RANGES)

    def descriptor_names(self, settings):
        return ("radius", "aspect")

    def sweep_parameters(self, settings):
        return ("radius", "aspect")

    def rescaled(self, class_code, parameter, factor, settings):
        values = list(class_code)
        values[parameter] *= factor
        return (*values, *class_code), values[0] <= 0.5

    def perturbation_range(self, settings):
        return (0.8, 1.25)

    def perturbed_parameter(self, instance):
        return 0  # both radius and aspect are rescaled: the radius stands for the sweep

    def interpolated(self, instance_0, instance_1, alpha, settings):
        return tuple((1.0 - alpha) * a + alpha * b for a, b in zip(instance_0, instance_1))

    def table_columns(self, settings):
        return ("class_id", "instance_id", "radius", "aspect", "class_radius", "class_aspect", "psi", "seed", "occupancy")

    def instance_row(self, instance, settings):
        return dict(zip(("radius", "aspect", "class_radius", "class_aspect"), instance))

    def instance(self, row):
        return tuple(float(row[key]) for key in ("radius", "aspect", "class_radius", "class_aspect"))

    def class_code(self, rows, settings):
        first = rows.iloc[0]
        return (float(first["class_radius"]), float(first["class_aspect"]))


DISCS = Discs()
