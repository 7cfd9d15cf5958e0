"""FineFractalDB behind the family interface: the default table is byte-for-byte what it was before families."""

import numpy as np
import yaml

from fdsml import fingerprints
from fdsml.families import family_spec
from fdsml.families.generation import generate_table
from fdsml.ifs import determinant_probabilities, is_contractive, psi

from tests.support import ROOT

DEFAULT_PARAMS = ROOT / "conf/base/parameters_fractals.yml"
DEFAULT_TABLE_DIGEST = "b80b126f17eb1ad73373fc97d9d40425201e7266dcfca634b5af8d6f6f251d01"
"""``fingerprints.content_digest`` of the conf/base default table (10 x 20 at 64 px). First pinned on main at 11fc89d,
before FineFractalDB became a family; re-pinned when |det| and Psi stopped going through LAPACK and BLAS,
whose CPU-specific kernels gave the table other last bits on another machine (the same on every machine now)."""
ONE_MAP_DIGEST = "dd8b324fe1495955e9e3f4be72d54e04b18c7263feecedf2df02159e211e1303"
"""The same, for 4 classes of the uniform sampler, one_map scope and 2 positions per class (the other code paths)."""


def default_params():
    return yaml.safe_load(DEFAULT_PARAMS.read_text())["fractals"]


def test_the_default_table_is_byte_identical_to_the_pre_family_generator():
    table, summary = generate_table(family_spec(default_params()))
    assert fingerprints.content_digest(table) == DEFAULT_TABLE_DIGEST == summary["table_digest"]
    assert summary["family"] == "finefractaldb" and summary["title"] == "FineFractalDB"


def test_the_other_code_paths_are_byte_identical_too():
    params = default_params()
    params |= {"n_classes": 4, "sampler": "uniform"}
    params["perturbation"] = dict(params["perturbation"], scope="one_map", positions_per_class=2)
    assert fingerprints.content_digest(generate_table(family_spec(params))[0]) == ONE_MAP_DIGEST


def test_instances_round_trip_through_the_table_and_class_codes_are_recovered():
    params = default_params() | {"n_classes": 2, "instances_per_class": 3}
    spec = family_spec(params)
    table, _ = generate_table(spec)
    for _, rows in table.groupby("class_id"):
        code = spec.family.class_code(rows, spec.settings)
        for _, row in rows.iterrows():
            instance = spec.instance(row)
            assert is_contractive(instance.coefficients)
            np.testing.assert_allclose(instance.probabilities, determinant_probabilities(instance.coefficients))
            np.testing.assert_array_equal(spec.descriptor(instance), row["psi"])
            np.testing.assert_array_equal(spec.descriptor(instance), psi(instance.coefficients, instance.probabilities))
            undone = spec.family.rescaled(code, instance.position, instance.factor, spec.settings)[0]
            np.testing.assert_allclose(undone.coefficients, instance.coefficients, rtol=1e-12)


def class_codes(seed: int) -> list[np.ndarray]:
    spec = family_spec(default_params() | {"n_classes": 2, "instances_per_class": 2, "seed": seed})
    table, _ = generate_table(spec)
    return [spec.family.class_code(rows, spec.settings).code for _, rows in table.groupby("class_id")]


def test_the_seed_draws_the_class_codes():
    first, again, other = class_codes(1), class_codes(1), class_codes(2)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert all(a.shape != b.shape or not np.allclose(a, b) for a, b in zip(first, other))
