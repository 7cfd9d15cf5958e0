"""FineFractalDB behind the family interface: the default table is byte-for-byte what it was before families."""

import dataclasses
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import yaml

from fdsml import fingerprints
from fdsml.config import ConfigError
from fdsml.families import family_spec
from fdsml.families.finefractaldb import FINEFRACTALDB, FractalClass, generate_finefractaldb
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


def small_spec(**settings):
    return family_spec(default_params() | {"n_classes": 4, "instances_per_class": 2, **settings})


def test_the_summary_counts_codes_and_rejections_by_their_own_names():
    """Hand counts: 4 classes, one replaced, from 10 codes drawn, 2 not contractive, 3 filtered out."""
    spec = small_spec()
    table = pd.DataFrame({"class_id": [0, 0, 1, 2, 3], "n_maps": [2, 2, 3, 2, 4]})
    counts = Counter(codes_sampled=10, noncontractive_codes=2, filter_rejections=3, replacements=1, invalid_rejections=7)
    assert spec.family.summary(table, counts, spec.settings) == {
        "sampler": "sigma_factor",
        "class_codes_sampled": 10,
        "class_noncontractive_rejections": 2,
        "class_filter_rejections": 3,
        "class_acceptance_rate": 0.5,  # (4 classes + 1 replacement) / 10 codes
        "class_filter_acceptance_rate": 0.625,  # (8 contractive - 3 filtered) / 8
        "instance_contraction_rejections": 7,
        "n_maps": {"2": 2, "3": 1, "4": 1},  # classes, not rows, by their number of maps
        "render": dataclasses.asdict(spec.settings.render),
    }


def test_the_definition_reads_as_the_settings_say():
    params = default_params()
    settings = {
        "seed": 7,
        "sampler": "uniform",
        "class_filter": dict(params["class_filter"], enabled=True, size=96, min_fill=0.3),
        "perturbation": dict(params["perturbation"], factor_range=[0.9, 1.1]),
        "render": dict(params["render"], size=48, points=2000, mode="point"),
    }
    spec = small_spec(**settings)
    assert spec.family.describe(spec.settings) == {
        "classes x instances": "4 x 2 (seed 7)",
        "class codes": "uniform",
        "class filter": "fill >= 0.3 at 96 px",
        "instance perturbation": "one coefficient per map x U[0.9, 1.1]",
        "rendering": "48 px, 2000 points, point",
    }
    unfiltered = small_spec(class_filter={"enabled": False})
    assert unfiltered.family.describe(unfiltered.settings)["class filter"] == "off"


def test_two_instances_interpolate_map_by_map_with_determinant_probabilities():
    spec = small_spec(n_classes=1)
    table, _ = generate_table(spec)
    first, second = (spec.instance(row) for _, row in table.iterrows())
    for alpha in (0.0, 0.25, 1.0):
        between = spec.family.interpolated(first, second, alpha, spec.settings)
        expected = (1 - alpha) * first.coefficients + alpha * second.coefficients
        np.testing.assert_allclose(between.coefficients, expected, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(between.probabilities, determinant_probabilities(expected))
        assert (between.position, between.factor) == (first.position, first.factor)
    groups = spec.family.interpolation_groups(table)
    assert groups.tolist() == table["n_maps"].tolist()


def test_a_table_with_an_invalid_code_is_refused_naming_the_table_and_row():
    spec = small_spec(n_classes=1)
    table, _ = generate_table(spec)
    spec.family.check_table(table, "fractal_codes", spec.settings)  # as generated: accepted
    broken = table.copy()
    broken.at[1, "coefficients"] = [2.0 * value for value in broken.at[1, "coefficients"]]
    with pytest.raises(ConfigError, match=r"^my_codes: row 1 \(class 0, instance 1\)"):
        spec.family.check_table(broken, "my_codes", spec.settings)
    with pytest.raises(ConfigError, match="^my_codes: missing column"):
        spec.family.check_table(table.drop(columns=["psi"]), "my_codes", spec.settings)


def test_a_class_with_fewer_positions_recovers_the_ones_its_rows_perturbed():
    params = default_params()
    params["perturbation"] = dict(params["perturbation"], positions_per_class=2)
    spec = family_spec(params | {"n_classes": 1, "instances_per_class": 6})
    table, _ = generate_table(spec)
    assert spec.family.class_code(table, spec.settings).positions == tuple(sorted(set(table["position"].astype(int))))
    assert len(spec.family.class_code(table, spec.settings).positions) <= 2
    every = small_spec(n_classes=1)  # six positions a class: all of them, whichever its rows perturbed
    assert every.family.class_code(generate_table(every)[0], every.settings).positions == (0, 1, 2, 3, 4, 5)


def test_a_rescaled_code_keeps_its_perturbation_and_says_when_no_map_is_left_to_weigh():
    """Coefficient a of every map rescaled; maps with b = c = 0 then have det = a d, all zero at factor 0."""
    code = FractalClass(np.array([[0.5, 0.0, 0.0, 0.4, 0.1, 0.0], [0.3, 0.0, 0.0, 0.6, 0.0, 0.2]]), (0,))
    instance, valid = FINEFRACTALDB.rescaled(code, 0, 1.5, None)
    np.testing.assert_allclose(instance.coefficients[:, 0], [0.75, 0.45], rtol=1e-15)
    assert (instance.position, instance.factor, valid) == (0, 1.5, True)
    assert FINEFRACTALDB.rescaled(code, 0, 0.0, None) == (None, True)  # singular, yet contractive
    assert FINEFRACTALDB.rescaled(FractalClass(2 * code.code, (0,)), 0, 0.0, None) == (None, False)


def test_generating_from_a_finefractaldb_config_is_generating_its_family_spec():
    spec = small_spec(n_classes=2)
    table, summary = generate_finefractaldb(spec.settings)
    assert summary["table_digest"] == fingerprints.content_digest(generate_table(spec)[0]) == fingerprints.content_digest(table)
    assert summary["n_instances"] == 4
