import numpy as np
import pytest

from fdsml.families.perlin import perlin_curve

CELLS = 8
T = np.linspace(0.0, CELLS, 2001)


def test_same_seed_same_curve_and_other_seeds_or_streams_differ():
    curve = perlin_curve(5, 0, CELLS, T)
    assert np.array_equal(curve, perlin_curve(5, 0, CELLS, T))
    assert not np.allclose(curve, perlin_curve(6, 0, CELLS, T))
    assert not np.allclose(curve, perlin_curve(5, 1, CELLS, T))


def test_curve_is_periodic_over_the_cells():
    shifted = perlin_curve(3, 2, CELLS, T + CELLS)
    assert np.allclose(perlin_curve(3, 2, CELLS, T), shifted, atol=1e-12)
    assert np.allclose(perlin_curve(3, 2, CELLS, T - 2 * CELLS), shifted, atol=1e-12)


def test_curve_vanishes_on_the_lattice_is_bounded_and_smooth():
    lattice_points = np.arange(CELLS, dtype=float)
    assert np.allclose(perlin_curve(1, 0, CELLS, lattice_points), 0.0, atol=1e-12)
    curve = perlin_curve(1, 0, CELLS, T)
    assert np.all(np.abs(curve) <= 0.5)
    assert np.ptp(curve) > 0.1
    slope = np.diff(curve) / np.diff(T)
    # continuous derivative, also across the seam between the last cell and the first
    assert np.max(np.abs(np.diff(slope))) < 0.05
    assert abs(slope[0] - slope[-1]) < 0.05


def test_gradient_noise_matches_the_documented_formula():
    """Between lattice points the curve is the faded blend of its two gradient ramps: recover
    g_0 and g_1 from the slopes at the lattice points and check a midpoint by hand."""
    eps = 1e-6
    g0 = perlin_curve(9, 4, CELLS, np.array([eps]))[0] / eps
    g1 = -perlin_curve(9, 4, CELLS, np.array([1.0 - eps]))[0] / eps
    f = 0.3
    s = 6 * f**5 - 15 * f**4 + 10 * f**3
    expected = (1 - s) * g0 * f + s * g1 * (f - 1)
    assert perlin_curve(9, 4, CELLS, np.array([f]))[0] == pytest.approx(expected, abs=1e-5)
    assert -1.0 <= g0 <= 1.0 and -1.0 <= g1 <= 1.0


def test_cells_must_be_positive():
    with pytest.raises(ValueError, match="cells"):
        perlin_curve(0, 0, 0, T)


def test_one_lattice_cell_is_the_fewest_accepted():
    assert np.isfinite(perlin_curve(1, 0, 1, T)).all()
    with pytest.raises(ValueError, match="cells must be >= 1, got 0"):
        perlin_curve(1, 0, 0, T)
