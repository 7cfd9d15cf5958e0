import numpy as np
import pytest

from fdsml.ifs import (
    class_positions,
    determinant_probabilities,
    is_contractive,
    largest_singular_values,
    psi,
    random_perturbation,
    rescale_coefficient,
    sample_sigma_factor_code,
    sample_uniform_code,
)
from fdsml.ifs.codes import sigma_factor_singular_values


def test_probabilities_follow_absolute_determinants():
    code = np.array([[0.5, 0.0, 0.0, 0.5, 0, 0], [0.0, -0.2, 0.4, 0.0, 1, 1], [0.3, 0.1, 0.1, -0.3, 0, 0]])
    dets = np.array([0.25, 0.08, 0.1])
    np.testing.assert_allclose(determinant_probabilities(code), dets / dets.sum())


def test_all_singular_code_is_refused():
    with pytest.raises(ValueError, match="singular"):
        determinant_probabilities(np.array([[1.0, 1.0, 1.0, 1.0, 0, 0]]))


def test_contraction_uses_largest_singular_value():
    shear = np.array([[0.9, 0.9, 0.0, 0.1, 0, 0]])  # |a| < 1 and |d| < 1, yet sigma_max > 1
    assert largest_singular_values(shear)[0] > 1
    assert not is_contractive(shear)
    assert is_contractive(np.array([[0.6, 0.0, 0.0, -0.99, 5, 5]]))


def test_a_map_whose_largest_singular_value_is_exactly_one_is_not_strictly_contractive():
    stretch = np.array([[1.0, 0.0, 0.0, 0.5, 0, 0]])  # singular values 1 and 0.5, exactly
    rotation_by_a_quarter_turn = np.array([[0.0, -1.0, 1.0, 0.0, 0, 0]])
    assert largest_singular_values(stretch)[0] == 1.0 and largest_singular_values(rotation_by_a_quarter_turn)[0] == 1.0
    assert not is_contractive(stretch) and not is_contractive(rotation_by_a_quarter_turn)
    assert is_contractive(np.array([[1.0 - 1e-12, 0.0, 0.0, 0.5, 0, 0]]))


def test_psi_matches_hand_computation():
    code = np.array([[1.0, 2, 3, 4, 5, 6], [-1.0, 0, 1, 2, 3, 4]])
    probabilities = np.array([0.25, 0.75])
    expected = [0.25 * 1 - 0.75, 0.5, 0.75 + 0.75, 1 + 1.5, 1.25 + 2.25, 1.5 + 3]
    np.testing.assert_allclose(psi(code, probabilities), expected)


def test_sigma_factor_singular_values_hit_the_target():
    rng = np.random.default_rng(3)
    for n_maps in (2, 3, 4):
        for _ in range(200):
            alpha = rng.uniform((5 + n_maps) / 2, (6 + n_maps) / 2)
            pairs = sigma_factor_singular_values(alpha, n_maps, rng)
            assert np.all(pairs[:, 1] >= 0) and np.all(pairs[:, 1] <= pairs[:, 0]) and np.all(pairs[:, 0] <= 1)
            assert np.isclose((pairs[:, 0] + 2 * pairs[:, 1]).sum(), alpha)


def test_sigma_factor_code_has_the_sampled_singular_values():
    rng = np.random.default_rng(0)
    for _ in range(100):
        code = sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0))
        n_maps = code.shape[0]
        singular = np.linalg.svd(code[:, :4].reshape(-1, 2, 2), compute_uv=False)
        sigma = (singular[:, 0] + 2 * singular[:, 1]).sum()
        assert 2 <= n_maps <= 4
        assert (5 + n_maps) / 2 - 1e-9 <= sigma <= (6 + n_maps) / 2 + 1e-9
        assert np.all(np.abs(code[:, 4:]) <= 1)


def test_uniform_sampler_maps_are_contractive_and_in_range():
    rng = np.random.default_rng(1)
    for _ in range(50):
        code = sample_uniform_code(rng, (2, 7), (-1.0, 1.0), 1000)
        assert 2 <= code.shape[0] <= 7
        assert is_contractive(code)
        assert np.all(np.abs(code) <= 1)


def test_perturbation_changes_exactly_one_position_by_a_factor_in_range():
    rng = np.random.default_rng(5)
    code = sample_sigma_factor_code(rng, (3, 3), (5.0, 6.0), (-1.0, 1.0))
    for _ in range(50):
        perturbed, position, factor, map_index = random_perturbation(code, rng, (0.6, 1.4))
        assert map_index is None
        assert 0.6 <= factor <= 1.4
        changed = ~np.isclose(perturbed, code)
        assert set(np.flatnonzero(changed.any(axis=0))) <= {position}
        np.testing.assert_allclose(perturbed[:, position], code[:, position] * factor)


def test_rescale_coefficient_does_not_touch_the_original():
    code = np.ones((2, 6))
    rescaled = rescale_coefficient(code, 4, 2.0)
    assert np.all(code == 1) and np.all(rescaled[:, 4] == 2)


def test_one_map_scope_rescales_the_position_in_one_map_only():
    rng = np.random.default_rng(6)
    code = sample_sigma_factor_code(rng, (4, 4), (5.0, 6.0), (-1.0, 1.0))
    maps_seen = set()
    for _ in range(40):
        perturbed, position, factor, map_index = random_perturbation(code, rng, (0.6, 1.4), one_map=True)
        changed = ~np.isclose(perturbed, code)
        assert set(zip(*np.nonzero(changed))) <= {(map_index, position)}
        assert perturbed[map_index, position] == pytest.approx(code[map_index, position] * factor)
        maps_seen.add(map_index)
    assert maps_seen == {0, 1, 2, 3}


def test_discrete_factors_come_from_the_given_weights():
    rng = np.random.default_rng(7)
    code = sample_sigma_factor_code(rng, (3, 3), (5.0, 6.0), (-1.0, 1.0))
    weights = (0.2, 0.6, 1.4, 1.8)
    factors = {random_perturbation(code, rng, (0.6, 1.4), factor_values=weights)[2] for _ in range(80)}
    assert factors == set(weights)


def test_positions_are_drawn_from_the_given_set():
    rng = np.random.default_rng(8)
    code = sample_sigma_factor_code(rng, (3, 3), (5.0, 6.0), (-1.0, 1.0))
    positions = {random_perturbation(code, rng, (0.6, 1.4), positions=(1, 4))[1] for _ in range(40)}
    assert positions == {1, 4}


def test_class_positions_draw_distinct_positions_and_leave_the_rng_alone_for_all_six():
    rng = np.random.default_rng(9)
    before = rng.bit_generator.state
    assert class_positions(rng, 6) == (0, 1, 2, 3, 4, 5)
    assert rng.bit_generator.state == before
    chosen = class_positions(rng, 3)
    assert len(set(chosen)) == 3 and set(chosen) <= set(range(6))
    with pytest.raises(ValueError, match="1 to 6"):
        class_positions(rng, 0)
