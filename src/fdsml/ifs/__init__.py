"""Iterated function systems: codes, Numba rendering, descriptors, shape distances."""

from fdsml.ifs.chamfer import chamfer_distance, chamfer_distances, empty_distance
from fdsml.ifs.codes import (
    COEFFICIENT_NAMES,
    class_positions,
    determinant_probabilities,
    is_contractive,
    largest_singular_values,
    random_perturbation,
    rescale_coefficient,
    sample_sigma_factor_code,
    sample_uniform_code,
)
from fdsml.ifs.descriptor import descriptor_distance, psi
from fdsml.ifs.render import FOREGROUND, MODES, RenderSettings, chaos_game, occupancy, render

__all__ = [
    "COEFFICIENT_NAMES",
    "FOREGROUND",
    "MODES",
    "RenderSettings",
    "chamfer_distance",
    "chamfer_distances",
    "chaos_game",
    "class_positions",
    "descriptor_distance",
    "determinant_probabilities",
    "empty_distance",
    "is_contractive",
    "largest_singular_values",
    "occupancy",
    "psi",
    "random_perturbation",
    "render",
    "rescale_coefficient",
    "sample_sigma_factor_code",
    "sample_uniform_code",
]
