"""Renders small batches with the Triton kernels under Triton's interpreter and with the Numba
renderer, and prints ``equal`` when every byte agrees; run in a subprocess by
``test_render_triton.py`` (``TRITON_INTERPRET`` must be set before Triton is imported)."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402

from fdsml.ifs import determinant_probabilities, render, sample_sigma_factor_code  # noqa: E402
from fdsml.ifs.render_triton import render_batch  # noqa: E402

from render_fuzz import OVERFLOWING  # noqa: E402

CASES = (("patch", 1, 2, 47), ("point", 4, 1, 50), ("patch", 8, 1, 45))
"""(mode, walkers, margin, points): points not a multiple of the walkers leave some lanes idle."""
ONE_MAP = (np.array([[0.0, 0, 0, 0.0, 0.1, 0.2]]), np.array([[1e300, 0, 0, 1e300, 1.0, 0]]))
"""Codes of one map: a single point (both axes degenerate: centred) and an orbit that diverges."""


def main() -> None:
    rng = np.random.default_rng(27)
    drawn = [sample_sigma_factor_code(rng, n, (5.0, 6.0), (-1.0, 1.0)) for n in ((2, 4), (2, 4), (5, 6))]
    codes = drawn + [OVERFLOWING[0], OVERFLOWING[2]]  # maps padded to 8; an extent that overflows, NaN after a while
    probabilities = [determinant_probabilities(code) for code in drawn] + [np.full(2, 0.5)] * 2
    seeds = [3, 2**62 + 9, 2**63 - 1, 5, 2**62]
    for mode, walkers, margin, points in CASES:
        arguments = dict(size=12, points=points, mode=mode, margin=margin, burn_in=4, walkers=walkers)
        reference = assert_equal(codes, probabilities, seeds, arguments)
        assert reference[:3].any(axis=(1, 2)).all() and not reference[3].any(), "three drawn images and one that cannot be framed"
    for mode, walkers in (("patch", 1), ("point", 4)):
        arguments = dict(size=12, points=30, mode=mode, margin=2, burn_in=4, walkers=walkers)
        reference = assert_equal(ONE_MAP, [np.ones(1)] * 2, [2**63 - 2, 11], arguments)
        assert reference[0].any() and not reference[1].any(), "a point drawn, a divergent orbit empty"
    packed_batch_is_rendered_alike()
    print("equal")


def assert_equal(codes, probabilities, seeds, arguments) -> np.ndarray:
    """The batch through the Triton kernel against the Numba renderer; the reference images."""
    ours = render_batch(codes, probabilities, seeds, device="cpu", **arguments).numpy()
    reference = np.stack([render(c, p, seed=s, **arguments) for c, p, s in zip(codes, probabilities, seeds)])
    where = f"{arguments['mode']}, {arguments['walkers']} walkers"
    assert np.array_equal(ours, reference), f"{where}: {np.count_nonzero(ours != reference)} pixels differ"
    return reference


def packed_batch_is_rendered_alike() -> None:
    """The device source's packed rows (``pretrain.data.source: device``) through the Triton kernels."""
    from fdsml.data.device_render import DeviceRenderedCodes, render_packed, unpacked
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table
    from fdsml.ifs.render_triton import render_tensors

    spec = family_spec({"n_classes": 2, "instances_per_class": 2, "class_filter": {"enabled": False},
                        "render": {"size": 12, "points": 40, "burn_in": 3, "walkers": 4}})
    table, _ = generate_table(spec)
    dataset = DeviceRenderedCodes(table, spec, seed=1, fresh_noise=True)
    packed = dataset.collated_items(np.arange(len(table)))["image"].reshape(len(table), -1)
    render = spec.settings.render
    ours = render_tensors(*unpacked(packed, dataset.max_maps), size=12, points=40, mode=render.mode, margin=render.margin, burn_in=3, walkers=4)
    assert torch.equal(ours, render_packed(packed, dataset.max_maps, render)), "packed rows render differently"
    assert torch.equal(dataset.model_input(packed, kernel=True), dataset.model_input(packed)), "the kernel's model input differs"


if __name__ == "__main__":
    main()
