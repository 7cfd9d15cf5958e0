"""IFS codes: sampling, contraction, |det| probabilities and single-coefficient perturbation.

A code is an ``(N, 6)`` float array, one row ``(a, b, c, d, e, f)`` per affine map
``w(x) = [[a, b], [c, d]] x + (e, f)`` (docs/method.md §1.1).
"""

from __future__ import annotations

import numpy as np

COEFFICIENT_NAMES = ("a", "b", "c", "d", "e", "f")


def largest_singular_values(coefficients: np.ndarray) -> np.ndarray:
    """Largest singular value of each map's A_k (its Lipschitz constant).

    Closed form for 2 x 2 matrices, (|(a + d, b - c)| + |(a - d, b + c)|) / 2: the same values as
    an SVD to rounding, five times faster (the contraction check runs per fresh instance in the loader).
    """
    coefficients = np.asarray(coefficients, dtype=np.float64)
    a, b, c, d = coefficients[:, 0], coefficients[:, 1], coefficients[:, 2], coefficients[:, 3]
    return 0.5 * (np.hypot(a + d, b - c) + np.hypot(a - d, b + c))


def is_contractive(coefficients: np.ndarray) -> bool:
    """True when every map is strictly contractive (largest singular value < 1)."""
    return bool(np.all(largest_singular_values(coefficients) < 1.0))


def determinant_probabilities(coefficients: np.ndarray) -> np.ndarray:
    """pi_k = |det A_k| / sum_j |det A_j|; raises when every map is singular.

    det = ad - bc in plain IEEE arithmetic: LAPACK's LU determinant rounds differently on
    different CPUs (its kernels are chosen at run time), which changed the table's bytes between
    machines.
    """
    coefficients = np.asarray(coefficients, dtype=np.float64)
    dets = np.abs(coefficients[:, 0] * coefficients[:, 3] - coefficients[:, 1] * coefficients[:, 2])
    total = dets.sum()
    if not total > 0:
        raise ValueError("every map of the code is singular: |det| probabilities are undefined")
    return dets / total


def rotation(theta: float) -> np.ndarray:
    """2-D rotation matrix by angle ``theta``."""
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[c, -s], [s, c]])


def sigma_factor_singular_values(alpha: float, n_maps: int, rng: np.random.Generator) -> np.ndarray:
    """Singular value pairs ``(s1_k, s2_k)`` with 0 <= s2 <= s1 <= 1 and sum(s1 + 2 s2) = alpha.

    Each map takes its share of the remaining budget B uniformly inside the interval that
    still lets the later maps (at most 3 each) spend the rest exactly, so every draw is
    feasible; the pairs are then shuffled so no map position is favoured.
    """
    if not 0 < alpha <= 3 * n_maps:
        raise ValueError(f"sigma factor {alpha} is unreachable with {n_maps} maps (max {3 * n_maps})")
    pairs = np.empty((n_maps, 2))
    budget = alpha
    for k in range(n_maps):
        later = 3.0 * (n_maps - 1 - k)
        s1 = rng.uniform(max(0.0, (budget - later) / 3.0), min(1.0, budget))
        s2 = rng.uniform(max(0.0, (budget - later - s1) / 2.0), min(s1, (budget - s1) / 2.0))
        pairs[k] = s1, s2
        budget -= s1 + 2.0 * s2
    return pairs[rng.permutation(n_maps)]


def sample_sigma_factor_code(
    rng: np.random.Generator,
    n_maps_range: tuple[int, int],
    alpha_offsets: tuple[float, float],
    translation_range: tuple[float, float],
) -> np.ndarray:
    """Anderson & Farrell's sampler: maps R(t1) S diag(s1, s2) R(t2) S' with a target sigma factor.

    ``alpha ~ U[(lo + N) / 2, (hi + N) / 2]`` for ``alpha_offsets = (lo, hi)``.
    """
    n_maps = int(rng.integers(n_maps_range[0], n_maps_range[1] + 1))
    alpha = rng.uniform((alpha_offsets[0] + n_maps) / 2.0, (alpha_offsets[1] + n_maps) / 2.0)
    singular = sigma_factor_singular_values(alpha, n_maps, rng)
    code = np.empty((n_maps, 6))
    for k in range(n_maps):
        theta1, theta2 = rng.uniform(-np.pi, np.pi, size=2)
        signs_left = np.diag(rng.choice([-1.0, 1.0], size=2))
        signs_right = np.diag(rng.choice([-1.0, 1.0], size=2))
        matrix = rotation(theta1) @ signs_left @ np.diag(singular[k]) @ rotation(theta2) @ signs_right
        code[k, :4] = matrix.reshape(4)
        code[k, 4:] = rng.uniform(translation_range[0], translation_range[1], size=2)
    return code


def sample_uniform_code(
    rng: np.random.Generator,
    n_maps_range: tuple[int, int],
    coefficient_range: tuple[float, float],
    max_draws_per_map: int,
) -> np.ndarray:
    """FractalDB-style sampler: all six coefficients ~ U[low, high], each map redrawn until contractive."""
    n_maps = int(rng.integers(n_maps_range[0], n_maps_range[1] + 1))
    code = np.empty((n_maps, 6))
    for k in range(n_maps):
        for _ in range(max_draws_per_map):
            row = rng.uniform(coefficient_range[0], coefficient_range[1], size=6)
            if largest_singular_values(row[None])[0] < 1.0:
                code[k] = row
                break
        else:
            raise RuntimeError(
                f"uniform sampler found no contractive map in {max_draws_per_map} draws from "
                f"U{list(coefficient_range)}; widen fractals.uniform.max_draws_per_map or narrow the range"
            )
    return code


POSITIONS = tuple(range(len(COEFFICIENT_NAMES)))


def rescale_coefficient(
    coefficients: np.ndarray, position: int, factor: float, map_index: int | None = None
) -> np.ndarray:
    """A copy of the code with coefficient ``position`` (0..5 = a..f) multiplied by ``factor``
    in every map, or in map ``map_index`` only."""
    perturbed = np.array(coefficients, dtype=np.float64, copy=True)
    perturbed[slice(None) if map_index is None else map_index, position] *= factor
    return perturbed


def interpolate_codes(code_0: np.ndarray, code_1: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """(len(alphas), N, 6): (1 - alpha) code_0 + alpha code_1 for each alpha."""
    code_0, code_1 = np.asarray(code_0, dtype=np.float64), np.asarray(code_1, dtype=np.float64)
    if code_0.shape != code_1.shape:
        raise ValueError(f"codes with different shapes cannot be interpolated map by map: {code_0.shape} and {code_1.shape}")
    alphas = np.asarray(alphas, dtype=np.float64)[:, None, None]
    return (1.0 - alphas) * code_0 + alphas * code_1


def class_positions(rng: np.random.Generator, count: int) -> tuple[int, ...]:
    """The coefficient positions a class's instances may perturb: all six, or ``count`` drawn without replacement.

    With all six nothing is drawn, so ``rng`` is left as it was.
    """
    if not 1 <= count <= len(POSITIONS):
        raise ValueError(f"a class perturbs 1 to {len(POSITIONS)} positions, got {count}")
    if count == len(POSITIONS):
        return POSITIONS
    return tuple(sorted(int(p) for p in rng.choice(len(POSITIONS), size=count, replace=False)))


def random_perturbation(
    coefficients: np.ndarray,
    rng: np.random.Generator,
    factor_range: tuple[float, float],
    *,
    positions: tuple[int, ...] = POSITIONS,
    factor_values: tuple[float, ...] | None = None,
    one_map: bool = False,
) -> tuple[np.ndarray, int, float, int | None]:
    """One FineFractalDB instance draw: one position of ``positions``, rescaled by a random factor.

    The factor is s ~ U[factor_range], or one of ``factor_values`` with equal chance when given
    (FractalDB's discrete weights). The position is rescaled in every map, or with ``one_map`` in
    one map drawn uniformly. Returns the perturbed code, the position, the factor and the map
    (None: every map). The defaults draw exactly as FineFractalDB's first reading did.
    """
    position = positions[int(rng.integers(0, len(positions)))]
    if factor_values is None:
        factor = float(rng.uniform(factor_range[0], factor_range[1]))
    else:
        factor = float(factor_values[int(rng.integers(0, len(factor_values)))])
    map_index = int(rng.integers(0, coefficients.shape[0])) if one_map else None
    return rescale_coefficient(coefficients, position, factor, map_index), position, factor, map_index
