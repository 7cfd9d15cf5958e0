"""Speed of the L1 Chamfer distance ``fdsml.ifs.chamfer`` on 256 x 256 renderings, per pair.

    python benchmarks/chamfer_speed.py --size 256 --pairs 64 --brute-pairs 2 --json

Times, in one run on the same pairs: one pair at a time; the batched call (over Numba's threads, NUMBA_NUM_THREADS);
two ``scipy.ndimage.distance_transform_cdt(metric="taxicab")`` transforms per pair (the library route); and the
brute-force all-pairs formula (chunked ``scipy.spatial.distance.cdist``, on the first ``--brute-pairs`` pairs only:
it is slow). Prints each as ms per pair and as a ratio to the single-pair time, and checks all agree.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.ndimage import distance_transform_cdt
from scipy.spatial.distance import cdist

from fdsml.ifs import RenderSettings, determinant_probabilities, sample_sigma_factor_code
from fdsml.ifs.chamfer import chamfer_distance, chamfer_distances
from timing import best_seconds, parser, print_result


def brute_force(a: np.ndarray, b: np.ndarray, chunk: int = 2048) -> float:
    """docs/method.md §6.1's formula over all pixel pairs, in chunks to bound memory."""
    pa, pb = np.argwhere(a), np.argwhere(b)
    a_to_b = np.concatenate([cdist(pa[i : i + chunk], pb, "cityblock").min(axis=1) for i in range(0, len(pa), chunk)])
    b_to_a = np.concatenate([cdist(pb[i : i + chunk], pa, "cityblock").min(axis=1) for i in range(0, len(pb), chunk)])
    return 0.5 * (a_to_b.mean() + b_to_a.mean())


def scipy_cdt(a: np.ndarray, b: np.ndarray) -> float:
    """The same distance through two scipy taxicab distance transforms."""
    to_b = distance_transform_cdt(b == 0, metric="taxicab")
    to_a = distance_transform_cdt(a == 0, metric="taxicab")
    return 0.5 * (to_b[a != 0].mean() + to_a[b != 0].mean())


def per_pair(seconds: float, pairs: int) -> float:
    return 1e3 * seconds / pairs


def main() -> None:
    command = parser(__doc__, "--json")
    command.add_argument("--size", type=int, default=256)
    command.add_argument("--points", type=int, default=100_000)
    command.add_argument("--pairs", type=int, default=64)
    command.add_argument("--brute-pairs", type=int, default=2)
    command.add_argument("--repeats", type=int, default=5, help="best of this many passes")
    command.add_argument("--seed", type=int, default=0)
    args = command.parse_args()

    rng = np.random.default_rng(args.seed)
    settings = RenderSettings(size=args.size, points=args.points)
    images = []
    for i in range(2 * args.pairs):
        code = sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0))
        images.append(settings.render(code, determinant_probabilities(code), i))
    a, b = np.stack(images[: args.pairs]), np.stack(images[args.pairs :])
    chamfer_distance(a[0], b[0])
    chamfer_distances(a[:2], b[:2])

    single = best_seconds(lambda: [chamfer_distance(x, y) for x, y in zip(a, b)], args.repeats)
    batched = best_seconds(lambda: chamfer_distances(a, b), args.repeats)
    library = best_seconds(lambda: [scipy_cdt(x, y) for x, y in zip(a, b)], args.repeats)
    started = time.perf_counter()
    reference = [brute_force(x, y) for x, y in zip(a[: args.brute_pairs], b[: args.brute_pairs])]
    brute = time.perf_counter() - started

    ours = chamfer_distances(a, b)
    agree_brute = bool(np.allclose(ours[: args.brute_pairs], reference, atol=1e-9))
    agree_scipy = bool(np.allclose(ours, [scipy_cdt(x, y) for x, y in zip(a, b)], atol=1e-9))
    single_ms = per_pair(single, args.pairs)
    result = {"size": args.size, "pairs": args.pairs, "occupancy": round(float(np.mean(a != 0)), 3),
              "single_ms_per_pair": round(single_ms, 4), "batched_ms_per_pair": round(per_pair(batched, args.pairs), 4),
              "scipy_cdt_ms_per_pair": round(per_pair(library, args.pairs), 4),
              "brute_force_ms_per_pair": round(per_pair(brute, args.brute_pairs), 1), "batched_speedup": round(single / batched, 2),
              "scipy_cdt_over_single": round(per_pair(library, args.pairs) / single_ms, 2),
              "brute_force_over_single": round(per_pair(brute, args.brute_pairs) / single_ms, 1),
              "agrees_with_brute_force": agree_brute, "agrees_with_scipy_cdt": agree_scipy}  # fmt: skip
    print_result(result, args.json)


if __name__ == "__main__":
    main()
