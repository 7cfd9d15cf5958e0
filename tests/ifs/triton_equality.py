"""Renders small batches with the Triton kernels under Triton's interpreter and with the Numba
renderer, and prints ``equal`` when every byte agrees; run in a subprocess by
``test_render_triton.py`` (``TRITON_INTERPRET`` must be set before Triton is imported)."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402

from fdsml.ifs import determinant_probabilities, render, sample_sigma_factor_code  # noqa: E402
from fdsml.ifs.render_triton import render_batch  # noqa: E402

from render_fuzz import OVERFLOWING  # noqa: E402

CASES = (("patch", 1, 2, 47), ("point", 4, 1, 50), ("patch", 8, 1, 45))
"""(mode, walkers, margin, points): points not a multiple of the walkers leave some lanes idle."""


def main() -> None:
    rng = np.random.default_rng(27)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(2)] + [OVERFLOWING[0]]
    probabilities = [determinant_probabilities(code) for code in codes[:2]] + [np.full(2, 0.5)]
    seeds = [3, 2**62 + 9, 5]
    for mode, walkers, margin, points in CASES:
        arguments = dict(size=12, points=points, mode=mode, margin=margin, burn_in=4, walkers=walkers)
        ours = render_batch(codes, probabilities, seeds, device="cpu", **arguments).numpy()
        reference = np.stack([render(c, p, seed=s, **arguments) for c, p, s in zip(codes, probabilities, seeds)])
        assert reference[:2].any(axis=(1, 2)).all() and not reference[2].any(), "two drawn images and one empty"
        assert np.array_equal(ours, reference), f"{mode}, {walkers} walkers: {np.count_nonzero(ours != reference)} pixels differ"
    print("equal")


if __name__ == "__main__":
    main()
