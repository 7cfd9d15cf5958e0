import numpy as np
import pytest

from fdsml.ifs import (
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
        perturbed, position, factor = random_perturbation(code, rng, (0.6, 1.4))
        assert 0.6 <= factor <= 1.4
        changed = ~np.isclose(perturbed, code)
        assert set(np.flatnonzero(changed.any(axis=0))) <= {position}
        np.testing.assert_allclose(perturbed[:, position], code[:, position] * factor)


def test_rescale_coefficient_does_not_touch_the_original():
    code = np.ones((2, 6))
    rescaled = rescale_coefficient(code, 4, 2.0)
    assert np.all(code == 1) and np.all(rescaled[:, 4] == 2)
