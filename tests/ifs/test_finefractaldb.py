import re
from collections import Counter

import numpy as np
import pytest

from fdsml import fingerprints
from fdsml.config import ConfigError, parse
from fdsml.ifs import determinant_probabilities, is_contractive, largest_singular_values, psi
from fdsml.errors import GenerationError
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb
from fdsml.families.generation import generate_class
from fdsml.ifs.finefractaldb import (
    MAP_COLUMN,
    TABLE_COLUMNS,
    ClassFilter,
    FineFractalDBConfig,
    Perturbation,
    RenderSettings,
    SigmaFactorSampler,
    class_code,
    instance_code,
    sample_class_code,
)
from tests.support import tiny_fractals

TINY_PARAMS = tiny_fractals(seed=3, points=800, class_filter=(128, 5000))
TINY = parse(FineFractalDBConfig, TINY_PARAMS, "fractals")


@pytest.fixture(scope="module")
def generated():
    return generate_finefractaldb(TINY)


def test_every_stored_instance_obeys_the_method(generated):
    table, _ = generated
    assert len(table) == 3 * 6
    for _, row in table.iterrows():
        coefficients, probabilities = instance_code(row)
        assert coefficients.shape == (row["n_maps"], 6)
        assert np.all(largest_singular_values(coefficients) < 1)
        np.testing.assert_allclose(probabilities, determinant_probabilities(coefficients))
        assert np.isclose(probabilities.sum(), 1)
        np.testing.assert_allclose(row["psi"], psi(coefficients, probabilities))
        assert row["occupancy"] >= TINY.min_occupancy
        assert 0.6 <= row["factor"] <= 1.4


def test_instances_differ_from_their_class_code_in_one_position(generated):
    table, _ = generated
    for _, group in table.groupby("class_id"):
        codes = [instance_code(row)[0] for _, row in group.iterrows()]
        positions = group["position"].to_numpy()
        factors = group["factor"].to_numpy()
        # undo each instance's perturbation: all must give back the same class code
        bases = []
        for code, position, factor in zip(codes, positions, factors):
            base = code.copy()
            base[:, position] /= factor
            bases.append(base)
        for base in bases[1:]:
            np.testing.assert_allclose(base, bases[0])


def test_same_configuration_gives_an_identical_table(generated):
    table, _ = generated
    again, _ = generate_finefractaldb(TINY)
    assert table.equals(again)


def test_table_does_not_depend_on_worker_count(generated):
    table, _ = generated
    parallel, _ = generate_finefractaldb(FineFractalDBConfig(**{**vars(TINY), "workers": 2}))
    assert table.equals(parallel)


def test_a_class_can_be_rebuilt_alone(generated):
    table, _ = generated
    rows, _ = generate_class(FamilySpec(FINEFRACTALDB, TINY), 1)
    alone = [row["coefficients"] for row in rows]
    assert alone == table[table["class_id"] == 1]["coefficients"].tolist()


def test_summary_counts_rejections(generated):
    table, summary = generated
    assert summary["n_instances"] == len(table)
    assert summary["instance_draws"] == (
        len(table) + summary["instance_contraction_rejections"] + summary["instance_occupancy_rejections"]
    )
    assert summary["class_codes_sampled"] >= TINY.n_classes + summary["class_filter_rejections"]
    assert 0 < summary["class_acceptance_rate"] <= 1 and 0 < summary["instance_acceptance_rate"] <= 1


def test_occupancy_threshold_rejects_and_eventually_fails_clearly():
    impossible = FineFractalDBConfig(
        n_classes=1,
        instances_per_class=1,
        min_occupancy=0.99,
        max_class_replacements=1,
        perturbation=Perturbation(max_attempts=3),
        render=RenderSettings(size=32, points=200),
        class_filter=ClassFilter(enabled=False),
    )
    with pytest.raises(GenerationError, match="max_class_replacements"):
        generate_finefractaldb(impossible)


def test_uniform_sampler_generates_contractive_classes():
    config = FineFractalDBConfig(
        n_classes=2,
        instances_per_class=3,
        sampler="uniform",
        class_filter=ClassFilter(enabled=False),
        render=RenderSettings(size=32, points=500),
    )
    table, summary = generate_finefractaldb(config)
    assert summary["sampler"] == "uniform" and len(table) == 6
    assert table["n_maps"].between(2, 7).all()


# --- the generator's open choices (fractals.perturbation) ---

GOLDEN_DEFAULT = FineFractalDBConfig(
    n_classes=3, instances_per_class=4, render=RenderSettings(size=32, points=600), class_filter=ClassFilter(size=96, points=4000)
)
GOLDEN_DEFAULT_DIGEST = "7e4bf1f111162d60363a1af997152e3c7b3d253162b3b6ec2077353b5cf5775d"
"""``fingerprints.content_digest`` of GOLDEN_DEFAULT's table: the default table must not move by one byte.
Re-pinned when |det| and Psi left LAPACK and BLAS (their CPU-specific kernels rounded differently on
another machine); the generator's draws are those of before the perturbation choices became parameters."""


def variant(**perturbation) -> FineFractalDBConfig:
    """TINY with the given ``fractals.perturbation`` keys, through the parameter parser."""
    return parse(FineFractalDBConfig, {**TINY_PARAMS, "perturbation": perturbation}, "fractals")


def test_the_default_table_is_byte_identical_to_the_one_before_the_choices_existed():
    table, _ = generate_finefractaldb(GOLDEN_DEFAULT)
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert fingerprints.content_digest(table) == GOLDEN_DEFAULT_DIGEST


def test_every_choice_set_explicitly_to_its_default_gives_the_same_table(generated):
    explicit = variant(scope="every_map", factor="uniform", factor_range=[0.6, 1.4], positions_per_class=6)
    assert fingerprints.content_digest(generate_finefractaldb(explicit)[0]) == fingerprints.content_digest(generated[0])


def test_one_map_scope_changes_one_map_of_the_class_code_and_records_it():
    table, _ = generate_finefractaldb(variant(scope="one_map"))
    assert list(table.columns) == [*TABLE_COLUMNS, MAP_COLUMN]
    for _, group in table.groupby("class_id"):
        base = class_code(group.iloc[0])
        for _, row in group.iterrows():
            changed = ~np.isclose(instance_code(row)[0], base)
            assert set(zip(*np.nonzero(changed))) <= {(row[MAP_COLUMN], row["position"])}
            np.testing.assert_allclose(class_code(row), base)
    assert table[MAP_COLUMN].nunique() > 1


def test_discrete_factors_are_fractaldb_weights():
    table, _ = generate_finefractaldb(variant(factor="discrete"))
    assert set(table["factor"]) <= {0.2, 0.6, 1.4, 1.8}
    assert table["factor"].nunique() > 1


def test_one_position_per_class_is_shared_by_every_instance_of_the_class():
    table, _ = generate_finefractaldb(variant(positions_per_class=1))
    assert (table.groupby("class_id")["position"].nunique() == 1).all()
    assert table.groupby("class_id")["position"].first().nunique() > 1


def test_a_small_set_of_positions_per_class_bounds_each_class():
    table, _ = generate_finefractaldb(variant(positions_per_class=2))
    per_class = table.groupby("class_id")["position"].unique()
    assert all(1 <= len(positions) <= 2 for positions in per_class)
    assert sum(len(positions) == 2 for positions in per_class) >= 1


@pytest.mark.parametrize(
    ("perturbation", "key"),
    [
        ({"scope": "two_maps"}, "fractals.perturbation.scope"),
        ({"factor": "gaussian"}, "fractals.perturbation.factor"),
        ({"factor_values": []}, "fractals.perturbation.factor_values"),
        ({"factor_values": [0.6, -1.0]}, "fractals.perturbation.factor_values[1]"),
        ({"positions_per_class": 0}, "fractals.perturbation.positions_per_class"),
        ({"positions_per_class": 7}, "fractals.perturbation.positions_per_class"),
    ],
)
def test_bad_choices_are_refused_naming_the_key(perturbation, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        variant(**perturbation)


def test_the_summary_reports_how_many_filtered_classes_the_class_filter_accepts(generated):
    _, summary = generated
    filtered = summary["class_codes_sampled"] - summary["class_noncontractive_rejections"]
    assert summary["class_filter_acceptance_rate"] == pytest.approx((filtered - summary["class_filter_rejections"]) / filtered)


def test_every_class_code_drawn_is_counted_once_as_refused_filtered_out_or_kept():
    """Sigma factors at 3N make most codes non-contractive: both refusals occur, and each draw is tallied once."""
    config = FineFractalDBConfig(
        sigma_factor=SigmaFactorSampler(n_maps=(2, 2), alpha_offsets=(10.0, 10.0)), class_filter=ClassFilter(size=64, points=2000)
    )
    rng, totals = np.random.default_rng(0), Counter()
    for _ in range(8):
        counts = Counter()
        code = sample_class_code(config, rng, counts)
        assert is_contractive(code)
        assert counts["codes_sampled"] == counts["noncontractive_codes"] + counts["filter_rejections"] + 1
        totals.update(counts)
    assert totals["noncontractive_codes"] > 0 and totals["filter_rejections"] > 0


def test_a_class_filter_no_code_passes_names_its_settings():
    config = FineFractalDBConfig(class_filter=ClassFilter(size=32, points=500, min_fill=1.0, max_attempts=3))
    counts = Counter()
    with pytest.raises(GenerationError) as failed:
        sample_class_code(config, np.random.default_rng(0), counts)
    assert str(failed.value) == (
        "no class code passed the class filter in 3 draws (fractals.class_filter.min_fill=1.0); "
        "raise fractals.class_filter.max_attempts or lower min_fill"
    )
    assert counts == Counter(codes_sampled=3, filter_rejections=3)
