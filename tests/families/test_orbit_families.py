"""VisualAtom and RCDB: documented ranges, perturbation, descriptor, determinism, settings errors."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fdsml.config import ConfigError, parse
from fdsml.families import rcdb, visual_atom

FAMILIES = {
    "visual_atom": (visual_atom, visual_atom.VisualAtomSettings()),
    "rcdb": (rcdb, rcdb.RCDBSettings()),
}
DRAWS = 2000


@pytest.fixture(params=sorted(FAMILIES))
def family(request):
    return FAMILIES[request.param]


def draws(module, settings, n=DRAWS, seed=0):
    rng = np.random.default_rng(seed)
    classes = [module.sample_class(rng, settings) for _ in range(n)]
    return classes, [module.perturb(shape, rng, settings) for shape in classes]


def test_every_parameter_stays_in_its_documented_range(family):
    module, settings = family
    classes, instances = draws(module, settings)
    for name, (low, high) in module.ranges(settings).items():
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
    classes, _ = draws(visual_atom, settings)
    assert {c.vertices for c in classes} <= set(range(200, 1001))
    assert {c.orbits for c in classes} <= set(range(1, 201))
    assert all(c.n2 != c.n1 or c.n1 == 0 for c in classes)
    assert any(c.n1 == c.n2 == 0 for c in draws(visual_atom, settings, n=20_000)[0])  # allowed, and drawn
    assert {c.n1 for c in classes} == set(range(21)) and {c.n2 for c in classes} == set(range(21))


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
    module, settings = family
    ranges = module.ranges(settings)
    classes, instances = draws(module, settings, n=500)
    for shape, instance in zip(classes, instances):
        changed = {f.name for f in dataclasses.fields(shape) if getattr(shape, f.name) != getattr(instance, f.name)}
        assert changed <= {instance.perturbed} and instance.perturbed in module.CONTINUOUS
        low, high = ranges[instance.perturbed]
        expected = np.clip(getattr(shape, instance.perturbed) * instance.factor, low, high)
        assert getattr(instance, instance.perturbed) == pytest.approx(expected)
        assert module.class_of(instance) == shape
    assert {i.perturbed for i in instances} == set(module.CONTINUOUS)


def test_descriptor_is_scaled_to_the_unit_interval_and_follows_the_perturbed_parameter(family):
    module, settings = family
    names = list(module.ranges(settings))
    classes, instances = draws(module, settings, n=500)
    descriptors = np.array([module.descriptor(i, settings) for i in instances])
    assert descriptors.dtype == np.float32 and descriptors.shape == (500, len(names))
    assert descriptors.min() >= 0.0 and descriptors.max() <= 1.0
    for shape, instance, psi in zip(classes, instances, descriptors):
        base = module.descriptor(shape, settings)
        moved = np.flatnonzero(psi != base)
        assert set(names[j] for j in moved) <= {instance.perturbed}
    moved = [i for i, (c, d) in enumerate(zip(classes, descriptors)) if np.any(d != module.descriptor(c, settings))]
    assert len(moved) > 400  # clipping at a range end (or a zero amplitude) is the only way to stay put


def test_rescaled_instance_reports_validity(family):
    module, settings = family
    shape = module.sample_class(np.random.default_rng(2), settings)
    instance, valid = module.rescaled_instance(shape, "line_width", 1.0, settings)
    assert valid and module.class_of(instance) == shape
    _, valid = module.rescaled_instance(shape, "line_width", 1e6, settings)
    assert not valid


def test_same_seed_same_bytes_different_seeds_differ(family):
    module, settings = family
    _, instances = draws(module, dataclasses.replace(settings, size=128), n=20)
    rendering = dataclasses.replace(settings, size=128)
    for instance in instances:
        image = module.render(instance, rendering, 11)
        assert image.dtype == np.uint8 and image.shape == (128, 128)
        assert np.array_equal(image, module.render(instance, rendering, 11))
    busy = [i for i in instances if i.orbits > 3 and module.occupancy(module.render(i, rendering, 0)) > 0.01]
    assert busy
    assert all(not np.array_equal(module.render(i, rendering, 0), module.render(i, rendering, 1)) for i in busy)


def test_same_bytes_in_another_process():
    instance = draws(visual_atom, visual_atom.VisualAtomSettings(), n=1)[1][0]
    here = visual_atom.render(instance, visual_atom.VisualAtomSettings(size=96), 5)
    code = (
        "import sys, numpy as np; from fdsml.families import visual_atom as m; "
        f"i = m.AtomInstance(**{dataclasses.asdict(instance)!r}); "
        "sys.stdout.buffer.write(m.render(i, m.VisualAtomSettings(size=96), 5).tobytes())"
    )
    source = str(Path(visual_atom.__file__).parents[2])
    env = {**os.environ, "PYTHONPATH": source}
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=env).stdout
    assert there == here.tobytes()


def test_backgrounds_and_occupancy():
    atom = visual_atom.VisualAtomSettings(size=64)
    contour = rcdb.RCDBSettings(size=64)
    atom_instance = draws(visual_atom, atom, n=1)[1][0]
    contour_instance = draws(rcdb, contour, n=1)[1][0]
    off = dataclasses.replace(atom_instance, centre_x=1e5)
    assert visual_atom.occupancy(visual_atom.render(off, atom, 0)) == 0.0
    blank = rcdb.render(dataclasses.replace(contour_instance, centre_x=1e5), contour, 0)
    assert np.all(blank == 255) and rcdb.occupancy(blank) == 0.0
    drawn = rcdb.render(contour_instance, contour, 0)
    assert rcdb.occupancy(drawn) == np.mean(drawn != 255) > 0


@pytest.mark.parametrize(
    ("settings_type", "raw", "key"),
    [
        (visual_atom.VisualAtomSettings, {"frequency": [5, 5]}, "fractals.visual_atom.frequency"),
        (visual_atom.VisualAtomSettings, {"vertices": [2, 10]}, "fractals.visual_atom.vertices"),
        (visual_atom.VisualAtomSettings, {"amplitude": [3.0, 1.0]}, "fractals.visual_atom.amplitude"),
        (rcdb.RCDBSettings, {"vertices_mean": 0.0}, "fractals.rcdb.vertices_mean"),
        (rcdb.RCDBSettings, {"factor_range": [0.0, 1.4]}, "fractals.rcdb.factor_range"),
        (rcdb.RCDBSettings, {"line_width": [-0.1, 0.1]}, "fractals.rcdb.line_width"),
    ],
)
def test_bad_settings_name_the_key(settings_type, raw, key):
    name = key.rsplit(".", 1)[0]
    with pytest.raises(ConfigError, match=f"^{key}"):
        parse(settings_type, raw, name)
