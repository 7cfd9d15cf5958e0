"""FineFractalDB's settings: each refused at the first value outside its domain and accepted at its edge, by its key."""

import re

import pytest

from fdsml.config import ConfigError
from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig, Perturbation, SigmaFactorSampler, UniformSampler
from fdsml.ifs.render import MAX_WALKERS, RenderSettings


@pytest.mark.parametrize(
    ("settings_type", "outside", "message"),
    [
        (SigmaFactorSampler, {"n_maps": (0, 4)}, "fractals.sigma_factor.n_maps: range [0, 4] must lie inside [1, 64]"),
        (SigmaFactorSampler, {"n_maps": (2, 65)}, "fractals.sigma_factor.n_maps: range [2, 65] must lie inside [1, 64]"),
        (SigmaFactorSampler, {"alpha_offsets": (6.0, 5.0)}, "fractals.sigma_factor.alpha_offsets: range [6.0, 5.0] is empty or inverted"),
        (SigmaFactorSampler, {"translation": (1.0, -1.0)}, "fractals.sigma_factor.translation: range [1.0, -1.0] is empty or inverted"),
        (
            SigmaFactorSampler,
            {"alpha_offsets": (-2.0, 6.0)},  # the smallest sigma factor (-2 + 2) / 2 = 0
            "fractals.sigma_factor.alpha_offsets: the sigma factor must lie in (0, 3N] for every N; got [0.0, 5.0] for N in [2, 4]",
        ),
        (
            SigmaFactorSampler,
            {"alpha_offsets": (5.0, 10.5)},  # two maps may draw (10.5 + 2) / 2 = 6.25 > 3 x 2
            "fractals.sigma_factor.alpha_offsets: the sigma factor must lie in (0, 3N] for every N; got [3.5, 7.25] for N in [2, 4]",
        ),
        (UniformSampler, {"n_maps": (0, 7)}, "fractals.uniform.n_maps: range [0, 7] must lie inside [1, 64]"),
        (UniformSampler, {"n_maps": (2, 65)}, "fractals.uniform.n_maps: range [2, 65] must lie inside [1, 64]"),
        (UniformSampler, {"coefficient_range": (1.0, -1.0)}, "fractals.uniform.coefficient_range: range [1.0, -1.0] is empty"),
        (UniformSampler, {"max_draws_per_map": 0}, "fractals.uniform.max_draws_per_map: must be positive, got 0"),
        (ClassFilter, {"size": 0}, "fractals.class_filter.size: must be positive, got 0"),
        (ClassFilter, {"points": 0}, "fractals.class_filter.points: must be positive, got 0"),
        (ClassFilter, {"min_fill": 1.5}, "fractals.class_filter.min_fill: must lie in"),
        (ClassFilter, {"max_attempts": 0}, "fractals.class_filter.max_attempts: must be positive, got 0"),
        (Perturbation, {"factor_range": (1.4, 0.6)}, "fractals.perturbation.factor_range: range [1.4, 0.6] is empty"),
        (Perturbation, {"factor_range": (0.0, 1.4)}, "fractals.perturbation.factor_range[0]: must be positive, got 0.0"),
        (Perturbation, {"factor_values": ()}, "fractals.perturbation.factor_values: give at least one factor, e.g. [0.2, 0.6, 1.4, 1.8]"),
        (Perturbation, {"factor_values": (0.5, 0.0)}, "fractals.perturbation.factor_values[1]: must be positive, got 0.0"),
        (Perturbation, {"positions_per_class": 0}, "fractals.perturbation.positions_per_class: must lie in 1..6 (6 = any position, per instance), got 0"),
        (Perturbation, {"positions_per_class": 7}, "fractals.perturbation.positions_per_class: must lie in 1..6 (6 = any position, per instance), got 7"),
        (Perturbation, {"max_attempts": 0}, "fractals.perturbation.max_attempts: must be positive, got 0"),
    ],
)
def test_a_setting_outside_its_domain_is_refused_by_its_key(settings_type, outside, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        settings_type(**outside)


def test_every_setting_is_accepted_at_the_edge_of_its_domain():
    assert SigmaFactorSampler(n_maps=(1, 64), alpha_offsets=(-0.5, 0.5)).n_maps == (1, 64)
    assert SigmaFactorSampler(alpha_offsets=(-1.9, 10.0)).alpha_offsets == (-1.9, 10.0)  # (10 + 2) / 2 = 3 x 2 exactly
    assert UniformSampler(n_maps=(1, 64), max_draws_per_map=1).n_maps == (1, 64)
    assert ClassFilter(size=1, points=1, min_fill=0.0, max_attempts=1).min_fill == 0.0
    assert ClassFilter(min_fill=1.0).min_fill == 1.0
    assert Perturbation(positions_per_class=1, factor_values=(0.5,), max_attempts=1).positions_per_class == 1
    assert Perturbation(positions_per_class=6).positions_per_class == 6


@pytest.mark.parametrize(
    ("outside", "message"),
    [
        ({"seed": -1}, "fractals.seed: must lie in [0, 2**63), got -1"),
        ({"n_classes": 0}, "fractals.n_classes: must be positive, got 0"),
        ({"instances_per_class": 0}, "fractals.instances_per_class: must be positive, got 0"),
        ({"min_occupancy": 1.5}, "fractals.min_occupancy: must lie in"),
        ({"max_class_replacements": -1}, "fractals.max_class_replacements: must be >= 0, got -1"),
        ({"workers": 0}, "fractals.workers: must be positive, got 0"),
    ],
)
def test_a_table_setting_outside_its_domain_is_refused_by_its_key(outside, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        FineFractalDBConfig(**outside)


def test_a_table_is_accepted_at_the_edge_of_every_setting():
    config = FineFractalDBConfig(seed=0, n_classes=1, instances_per_class=1, min_occupancy=1.0, max_class_replacements=0, workers=1)
    assert (config.n_classes, config.max_class_replacements) == (1, 0)


@pytest.mark.parametrize(
    ("outside", "message"),
    [
        ({"margin": 0, "size": 16}, "size (16) and margin (0): need margin >= 1 and size >= 3 + 2 * margin"),
        ({"margin": 2, "size": 6}, "size (6) and margin (2): need margin >= 1 and size >= 3 + 2 * margin"),
        ({"points": 0}, "points: must be positive, got 0"),
        ({"burn_in": -1}, "burn_in: must be >= 0, got -1"),
        ({"walkers": 0}, f"walkers: must lie in [1, {MAX_WALKERS}], got 0"),
        ({"walkers": MAX_WALKERS + 1}, f"walkers: must lie in [1, {MAX_WALKERS}], got {MAX_WALKERS + 1}"),
    ],
)
def test_a_rendering_setting_outside_its_domain_is_refused_naming_it(outside, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        RenderSettings(**outside)


def test_a_rendering_is_accepted_at_the_edge_of_every_setting():
    settings = RenderSettings(size=5, margin=1, points=1, burn_in=0, walkers=MAX_WALKERS)
    assert settings.render([[0.5, 0.0, 0.0, 0.5, 0.0, 0.0]], [1.0], seed=0).shape == (5, 5)
    assert RenderSettings(walkers=1).walkers == 1
