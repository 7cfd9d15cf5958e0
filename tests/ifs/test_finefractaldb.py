import numpy as np
import pytest

from fdsml.ifs import determinant_probabilities, largest_singular_values, psi
from fdsml.ifs.finefractaldb import (
    ClassFilter,
    FineFractalDBConfig,
    GenerationError,
    Perturbation,
    RenderSettings,
    generate_class,
    generate_finefractaldb,
    instance_code,
)

TINY = FineFractalDBConfig(
    seed=3,
    n_classes=3,
    instances_per_class=6,
    render=RenderSettings(size=32, points=800),
    class_filter=ClassFilter(size=128, points=5000),
)


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
    rows, _ = generate_class(TINY, 1)
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
