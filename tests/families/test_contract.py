"""What every registered formula family keeps, whichever it is (a new one the day it is added, no line here changed):
settings from its defaults without a configuration block; a descriptor of one finite value per name that its table
row brings back; the class a table row was drawn from; seeded renderings; sweeps that start at the class itself."""

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from fdsml.families import GENERIC_COLUMNS, FamilySpec, family_spec, get_family, known_families
from fdsml.families.generation import draw_instance

DRAWS = 5


def drawn(name: str, seed: int = 0):
    """The family, its settings without a block, and :data:`DRAWS` (class code, accepted instance) pairs."""
    spec = family_spec({"family": name})
    rng, pairs = np.random.default_rng(seed), []
    while len(pairs) < DRAWS:
        class_code = spec.family.sample_class(rng, spec.settings, Counter())
        accepted = draw_instance(spec, class_code, rng, Counter())
        if accepted is not None:
            pairs.append((class_code, accepted))
    return spec, pairs


@pytest.mark.parametrize("name", known_families())
def test_a_family_without_a_block_runs_on_its_settings_defaults_and_takes_no_other_familys_keys(name):
    family = get_family(name)
    defaults = family.parse_settings({}, f"fractals.{name}")
    others = {"family": name, "n_classes": 3, "render": {"size": 16}} if name != "finefractaldb" else {"family": name}
    assert family_spec({"family": name}).settings == defaults
    assert family_spec(others).settings == defaults  # the top-level keys are FineFractalDB's alone


@pytest.mark.parametrize("name", known_families())
def test_the_descriptor_has_one_finite_value_per_name_and_a_table_row_brings_the_instance_back(name):
    spec, pairs = drawn(name)
    family, settings = spec.family, spec.settings
    columns = family.table_columns(settings)
    assert set(GENERIC_COLUMNS) <= set(columns) and len(set(columns)) == len(columns)
    names = family.descriptor_names(settings)
    for class_code, accepted in pairs:
        psi = np.asarray(family.descriptor(accepted.instance, settings))
        assert psi.shape == (len(names),) and np.all(np.isfinite(psi))
        row = {"class_id": 0, "instance_id": 0, **family.instance_row(accepted.instance, settings)}
        assert set(row) | set(GENERIC_COLUMNS) == set(columns)
        again = family.instance(row)
        np.testing.assert_array_equal(family.descriptor(again, settings), psi)
        assert np.array_equal(family.render(again, settings, accepted.seed), accepted.image)
        code = family.class_code(pd.DataFrame([row]), settings)
        recovered, original = (family.descriptor(family.rescaled(c, 0, 1.0, settings)[0], settings) for c in (code, class_code))
        np.testing.assert_allclose(recovered, original, rtol=1e-12, atol=1e-12)  # the class code, up to its rescaling
        assert 0 <= family.perturbed_parameter(accepted.instance) < len(family.sweep_parameters(settings))


@pytest.mark.parametrize("name", known_families())
def test_renderings_are_seeded_and_the_perturbation_range_holds_one(name):
    spec, pairs = drawn(name, seed=1)
    family, settings = spec.family, spec.settings
    low, high = family.perturbation_range(settings)
    assert 0 < low <= 1.0 <= high
    images = [family.render(accepted.instance, settings, 7) for _, accepted in pairs]
    for image, (_, accepted) in zip(images, pairs):
        assert image.dtype == np.uint8 and image.shape == (spec.size, spec.size)
        assert np.array_equal(image, family.render(accepted.instance, settings, 7))
    assert len({image.tobytes() for image in images}) > 1  # instances of different classes differ
    for class_code, _ in pairs:
        for position in range(len(family.sweep_parameters(settings))):
            itself, valid = family.rescaled(class_code, position, 1.0, settings)
            assert valid and FamilySpec(family, settings).render(itself, 0).dtype == np.uint8
