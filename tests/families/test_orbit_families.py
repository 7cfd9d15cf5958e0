"""VisualAtom and RCDB: documented ranges, perturbation, descriptor, determinism, settings errors."""

import dataclasses
from collections import Counter
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fdsml.config import ConfigError, parse
from fdsml.families import FamilySpec, get_family, rcdb, visual_atom
from fdsml.ifs.chamfer import chamfer_distances
from fdsml.descriptor_validation.sweeps import noise_floor

FAMILIES = {
    "visual_atom": (visual_atom.VISUAL_ATOM, visual_atom.VisualAtomSettings()),
    "rcdb": (rcdb.RCDB, rcdb.RCDBSettings()),
}
DRAWS = 2000


@pytest.fixture(params=sorted(FAMILIES))
def family(request):
    return FAMILIES[request.param]


def draws(orbit_family, settings, n=DRAWS, seed=0):
    rng = np.random.default_rng(seed)
    classes = [orbit_family.sample_class(rng, settings, Counter()) for _ in range(n)]
    return classes, [orbit_family.perturb(shape, rng, settings) for shape in classes]


def test_every_parameter_stays_in_its_documented_range(family):
    orbit_family, settings = family
    classes, instances = draws(orbit_family, settings)
    for name, (low, high) in orbit_family.ranges(settings).items():
        for params in (classes, instances):
            values = np.array([getattr(p, name) for p in params])
            assert values.min() >= low and values.max() <= high, name
        # the draws cover the range
        assert np.ptp([getattr(c, name) for c in classes]) > 0.8 * (high - low), name
    for instance in instances:
        assert isinstance(instance.vertices, int) and isinstance(instance.orbits, int)
        assert settings.centre[0] <= instance.centre_x <= settings.centre[1]
        assert settings.centre[0] <= instance.centre_y <= settings.centre[1]
        assert settings.factor_range[0] <= instance.factor <= settings.factor_range[1]


def test_visual_atom_ranges_and_frequencies():
    settings = visual_atom.VisualAtomSettings()
    classes, _ = draws(visual_atom.VISUAL_ATOM, settings)
    assert {c.vertices for c in classes} <= set(range(200, 1001))
    assert {c.orbits for c in classes} <= set(range(1, 201))
    assert all(c.n2 != c.n1 or c.n1 == 0 for c in classes)
    assert any(c.n1 == c.n2 == 0 for c in draws(visual_atom.VISUAL_ATOM, settings, n=20_000)[0])  # allowed, and drawn
    assert {c.n1 for c in classes} == set(range(21)) and {c.n2 for c in classes} == set(range(21))


def test_visual_atom_frequencies_from_a_range_above_zero_and_integer_ranges_reach_both_ends():
    """n1 from [low, high]; n2 from the others, uniformly: every value other than n1 drawn, none outside."""
    settings = visual_atom.VisualAtomSettings(frequency=(3, 6), vertices=(3, 4), orbits=(1, 2))
    classes = [visual_atom.VISUAL_ATOM.draw_class(np.random.default_rng(seed), settings) for seed in range(400)]
    assert {c.n1 for c in classes} == {c.n2 for c in classes} == {3, 4, 5, 6}
    assert all(c.n2 != c.n1 for c in classes)
    for n1 in range(3, 7):
        assert {c.n2 for c in classes if c.n1 == n1} == {3, 4, 5, 6} - {n1}
    assert {c.vertices for c in classes} == {3, 4} and {c.orbits for c in classes} == {1, 2}


def test_visual_atom_n2_after_a_zero_n1_takes_every_value_zero_included():
    settings = visual_atom.VisualAtomSettings(frequency=(0, 3))
    classes = [visual_atom.VISUAL_ATOM.draw_class(np.random.default_rng(seed), settings) for seed in range(400)]
    assert {c.n2 for c in classes if c.n1 == 0} == {0, 1, 2, 3}


@pytest.mark.parametrize("frequency", [(1, 1), (5, 5)])
def test_a_single_nonzero_frequency_is_refused_and_zero_alone_means_no_wave(frequency):
    low, high = frequency
    message = rf"^frequency: \[{low}, {high}\] leaves no n2 != n1; give at least two values, e.g. \[0, 20\], or \[0, 0\] for no wave$"
    with pytest.raises(ConfigError, match=message):
        visual_atom.VisualAtomSettings(frequency=frequency)
    assert visual_atom.VisualAtomSettings(frequency=(0, 0)).frequency == (0, 0)
    with pytest.raises(ConfigError, match="^frequency"):
        visual_atom.VisualAtomSettings(frequency=(-1, 3))


def test_the_fuzzer_pushes_about_half_the_continuous_parameters_to_either_sign_up_to_a_thousand(family):
    """What the render fuzzer asks of a renderer (tests/ifs/render_fuzz.py): only continuous parameters change,
    to magnitudes in [1e-3, 1e3] of either sign, and the size to 8..48 px; the same draws give the same instance."""
    orbit_family, settings = family
    _, instances = draws(orbit_family, settings, n=300)
    rng = np.random.default_rng(0)
    replaced, sizes = [], set()
    for instance in instances:
        fuzzed, rendering = orbit_family.fuzzed(instance, rng, settings)
        changed = {field.name for field in dataclasses.fields(instance) if getattr(fuzzed, field.name) != getattr(instance, field.name)}
        assert changed <= set(orbit_family.continuous)
        replaced += [getattr(fuzzed, name) for name in changed]
        sizes.add(rendering.size)
        assert dataclasses.replace(rendering, size=settings.size) == settings
    magnitudes = np.abs(replaced)
    assert magnitudes.min() >= 1e-3 and magnitudes.max() <= 1e3 and magnitudes.max() > 1e2
    assert 0.4 < np.mean(np.array(replaced) < 0) < 0.6
    assert 0.4 < len(replaced) / (len(instances) * len(orbit_family.continuous)) < 0.6
    assert sizes == set(range(8, 49))
    again = orbit_family.fuzzed(instances[0], np.random.default_rng(1), settings)
    assert again == orbit_family.fuzzed(instances[0], np.random.default_rng(1), settings)


def test_rcdb_vertices_are_a_truncated_exponential_with_mean_100():
    settings = rcdb.RCDBSettings()
    rng = np.random.default_rng(1)
    vertices = np.array([rcdb.sample_vertices(rng, settings) for _ in range(20_000)])
    assert vertices.min() == 3 and vertices.max() <= 200
    # floor(E) for E ~ Exp(mean 100) conditioned on floor(E) in 3..200
    k = np.arange(3, 201)
    weights = np.exp(-k / 100) - np.exp(-(k + 1) / 100)
    expected_mean = (k * weights).sum() / weights.sum()
    assert vertices.mean() == pytest.approx(expected_mean, abs=1.5)
    assert np.mean(vertices < 50) == pytest.approx(weights[k < 50].sum() / weights.sum(), abs=0.015)


def test_an_instance_rescales_one_continuous_parameter_and_keeps_the_integers(family):
    orbit_family, settings = family
    ranges = orbit_family.ranges(settings)
    classes, instances = draws(orbit_family, settings, n=500)
    for shape, instance in zip(classes, instances):
        changed = {f.name for f in dataclasses.fields(shape) if getattr(shape, f.name) != getattr(instance, f.name)}
        assert changed <= {instance.perturbed} and instance.perturbed in orbit_family.continuous
        low, high = ranges[instance.perturbed]
        expected = np.clip(getattr(shape, instance.perturbed) * instance.factor, low, high)
        assert getattr(instance, instance.perturbed) == pytest.approx(expected)
        assert orbit_family.class_of(instance) == shape
    assert {i.perturbed for i in instances} == set(orbit_family.continuous)


def test_descriptor_is_scaled_to_the_unit_interval_and_follows_the_perturbed_parameter(family):
    orbit_family, settings = family
    names = list(orbit_family.ranges(settings))
    classes, instances = draws(orbit_family, settings, n=500)
    descriptors = np.array([orbit_family.descriptor(i, settings) for i in instances])
    assert descriptors.shape == (500, len(names)) == (500, len(orbit_family.descriptor_names(settings)))
    assert descriptors.min() >= 0.0 and descriptors.max() <= 1.0
    for shape, instance, psi in zip(classes, instances, descriptors):
        base = orbit_family.descriptor(shape, settings)
        moved = np.flatnonzero(psi != base)
        assert set(names[j] for j in moved) <= {instance.perturbed}
    moved = [i for i, (c, d) in enumerate(zip(classes, descriptors)) if np.any(d != orbit_family.descriptor(c, settings))]
    assert len(moved) > 400  # clipping at a range end (or a zero amplitude) is the only way to stay put


def test_rescaled_instance_reports_validity(family):
    orbit_family, settings = family
    shape = orbit_family.sample_class(np.random.default_rng(2), settings, Counter())
    position = orbit_family.sweep_parameters(settings).index("line_width")
    instance, valid = orbit_family.rescaled(shape, position, 1.0, settings)
    assert valid and orbit_family.class_of(instance) == shape
    _, valid = orbit_family.rescaled(shape, position, 1e6, settings)
    assert not valid


def test_same_seed_same_bytes_different_seeds_differ(family):
    orbit_family, settings = family
    _, instances = draws(orbit_family, dataclasses.replace(settings, size=128), n=20)
    rendering = dataclasses.replace(settings, size=128)
    for instance in instances:
        image = orbit_family.render(instance, rendering, 11)
        assert image.dtype == np.uint8 and image.shape == (128, 128)
        assert np.array_equal(image, orbit_family.render(instance, rendering, 11))
    busy = [i for i in instances if i.orbits > 3 and orbit_family.occupancy(orbit_family.render(i, rendering, 0), rendering) > 0.01]
    assert busy
    assert all(not np.array_equal(orbit_family.render(i, rendering, 0), orbit_family.render(i, rendering, 1)) for i in busy)


def test_same_bytes_in_another_process():
    instance = draws(visual_atom.VISUAL_ATOM, visual_atom.VisualAtomSettings(), n=1)[1][0]
    here = visual_atom.VISUAL_ATOM.render(instance, visual_atom.VisualAtomSettings(size=96), 5)
    code = (
        "import sys, numpy as np; from fdsml.families import visual_atom as m; "
        f"i = m.AtomInstance(**{dataclasses.asdict(instance)!r}); "
        "sys.stdout.buffer.write(m.VISUAL_ATOM.render(i, m.VisualAtomSettings(size=96), 5).tobytes())"
    )
    source = str(Path(visual_atom.__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": source}
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=env).stdout
    assert there == here.tobytes()


def test_backgrounds_and_occupancy():
    atom = visual_atom.VisualAtomSettings(size=64)
    contour = rcdb.RCDBSettings(size=64)
    atoms, contours = visual_atom.VISUAL_ATOM, rcdb.RCDB
    atom_instance = draws(atoms, atom, n=1)[1][0]
    contour_instance = draws(contours, contour, n=1)[1][0]
    off = dataclasses.replace(atom_instance, centre_x=1e5)
    assert atoms.occupancy(atoms.render(off, atom, 0), atom) == 0.0
    blank = contours.render(dataclasses.replace(contour_instance, centre_x=1e5), contour, 0)
    assert np.all(blank == 255) and contours.occupancy(blank, contour) == 0.0
    drawn = contours.render(contour_instance, contour, 0)
    assert contours.occupancy(drawn, contour) == np.mean(drawn != 255) > 0


@pytest.mark.parametrize(
    ("settings_type", "raw", "key"),
    [
        (visual_atom.VisualAtomSettings, {"frequency": [5, 5]}, "fractals.visual_atom.frequency"),
        (visual_atom.VisualAtomSettings, {"vertices": [2, 10]}, "fractals.visual_atom.vertices"),
        (visual_atom.VisualAtomSettings, {"amplitude": [3.0, 1.0]}, "fractals.visual_atom.amplitude"),
        (rcdb.RCDBSettings, {"vertices_mean": 0.0}, "fractals.rcdb.vertices_mean"),
        (rcdb.RCDBSettings, {"factor_range": [0.0, 1.4]}, "fractals.rcdb.factor_range"),
        (rcdb.RCDBSettings, {"line_width": [-0.1, 0.1]}, "fractals.rcdb.line_width"),
        (rcdb.RCDBSettings, {"seed": -1}, "fractals.rcdb.seed"),
        (rcdb.RCDBSettings, {"stroke": 0.0}, "fractals.rcdb.stroke"),
        (rcdb.RCDBSettings, {"min_occupancy": 1.5}, "fractals.rcdb.min_occupancy"),
        (rcdb.RCDBSettings, {"max_class_replacements": -1}, r"fractals.rcdb.max_class_replacements: must be >= 0, got -1"),
        (rcdb.RCDBSettings, {"orbits": [0, 3]}, r"fractals.rcdb.orbits: range \[0, 3\] must lie inside \[1, inf\]"),
        (rcdb.RCDBSettings, {"oval": [0.0, 2.0]}, r"fractals.rcdb.oval\[0\]: must be positive"),
        (visual_atom.VisualAtomSettings, {"centre": [5.0, 1.0]}, r"fractals.visual_atom.centre: range \[\S+ \S+ is empty or inverted"),
        (visual_atom.VisualAtomSettings, {"factor_range": [1.4, 0.6]}, "fractals.visual_atom.factor_range: range"),
    ],
)
def test_bad_settings_name_the_key(settings_type, raw, key):
    name = key.rsplit(".", 1)[0]
    with pytest.raises(ConfigError, match=f"^{key}"):
        parse(settings_type, raw, name)


def test_registered_by_name_and_table_rows_round_trip(family):
    orbit_family, settings = family
    assert get_family(orbit_family.name) is orbit_family
    classes, instances = draws(orbit_family, settings, n=50)
    for shape, instance in zip(classes, instances):
        row = orbit_family.instance_row(instance, settings)
        assert set(row) | {"class_id", "instance_id", "psi", "seed", "occupancy"} == set(orbit_family.table_columns(settings))
        assert orbit_family.instance(row) == instance
    table = pd.DataFrame([{"class_id": 0, "instance_id": 0, **orbit_family.instance_row(instances[0], settings)}])
    assert orbit_family.class_code(table, settings) == classes[0]


def test_chamfer_distances_see_the_orbits_not_the_white_background():
    """Validation measures shapes through the family's foreground: RCDB re-rendered with other
    seeds (other noise) is a different shape, so its noise floor is above zero."""
    settings = rcdb.RCDBSettings(size=64)
    shape = rcdb.ContourClass(vertices=60, orbits=30, amplitude=2.0, line_width=0.05)
    spec = FamilySpec(rcdb.RCDB, settings)
    assert spec.foreground(np.full((2, 2), 255, np.uint8)).sum() == 0
    instance = rcdb.RCDB.rescaled(shape, 0, 1.0, settings)[0]
    drawn = [rcdb.RCDB.render(instance, settings, seed) != 255 for seed in range(4)]
    expected = np.median(chamfer_distances(drawn[0], np.stack(drawn[1:])))
    assert expected > 0.01
    assert noise_floor(shape, spec, 0, np.array([1, 2, 3])) == pytest.approx(expected)


def test_no_class_replacement_is_a_setting_and_the_orbits_may_start_at_one():
    settings = rcdb.RCDBSettings(max_class_replacements=0, orbits=(1, 1))
    assert settings.max_class_replacements == 0 and settings.orbits == (1, 1)


def test_each_class_drawn_counts_one_code_and_the_definition_names_the_perturbed_parameters(family):
    orbit_family, settings = family
    counts = Counter()
    for _ in range(3):
        orbit_family.sample_class(np.random.default_rng(0), settings, counts)
    assert counts == Counter(codes_sampled=3)
    described = orbit_family.describe(dataclasses.replace(settings, stroke=2.0, noise_cells=16, factor_range=(0.5, 1.5)))
    assert described["instance perturbation"] == f"one of {', '.join(orbit_family.continuous)} x U[0.5, 1.5], clipped to its range"
    assert described["rendering"] == "stroke 2.0 px at 512, 16 Perlin cells per orbit"
