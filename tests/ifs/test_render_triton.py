import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fdsml.ifs import determinant_probabilities, render, sample_sigma_factor_code
from fdsml.ifs.render_triton import render_batch, specialisations

from .render_fuzz import OVERFLOWING


@pytest.mark.slow
def test_triton_kernels_draw_the_numba_renderers_bytes():
    """The Triton renderer under Triton's interpreter, on CPU tensors, against the Numba renderer:
    one and several walkers, both modes, seeds near 2**62 and at 2**63 - 1, codes padded to more
    maps, codes that cannot be framed, a single point (degenerate axes) and the device source's rows."""
    script = Path(__file__).with_name("triton_equality.py")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd=script.parent)
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert done.stdout.splitlines()[-1] == "equal"


def test_walkers_must_be_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        render_batch([np.eye(2, 6)], [np.ones(2)], [0], size=16, points=10, walkers=3, device="cpu")


NEAR_2_62 = (2**62 + 9, 2**63 - 1, 2**62 - 1)


def codes_with(rng, maps: int, count: int) -> list:
    """``count`` contractive codes of at most ``maps`` maps, the first with exactly ``maps`` (so the batch is
    padded to it) and the others fewer where possible (padded maps that are never drawn)."""
    counts = [maps] + [int(rng.integers(max(maps // 2, 1), maps + 1)) for _ in range(count - 1)]
    return [sample_sigma_factor_code(rng, (n, n), (4.0, 5.0), (-1.0, 1.0)) for n in counts]  # reachable for one map too


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (benchmarks/gpu_check.py --quick-device runs it on a GPU)")
def test_on_a_gpu_every_specialisation_draws_the_numba_renderers_bytes():
    """Compiled for the GPU (what the interpreter test above cannot see), every kernel specialisation against
    :func:`fdsml.ifs.render`, byte for byte: random codes, codes that overflow the framing (for one map, a
    divergent one), seeds near 2^62 and at 2^63 - 1, points leaving lanes idle."""
    rng = np.random.default_rng(39)
    launched = sorted({(c["WALKERS"], c["MAX_MAPS"], c["PATCH"]) for _, _, c, _ in specialisations() if "PATCH" in c})
    differing = []
    for walkers, maps, patch in launched:
        codes = codes_with(rng, maps, 3) + (list(OVERFLOWING) if maps >= 2 else [np.array([[1e300, 0, 0, 1e300, 1.0, 0]])])
        probabilities = [determinant_probabilities(c) if i < 3 else np.full(c.shape[0], 1 / c.shape[0]) for i, c in enumerate(codes)]
        seeds = [NEAR_2_62[i % 3] - i for i in range(len(codes))]
        arguments = dict(size=32, points=997, mode="patch" if patch else "point", margin=2, burn_in=20, walkers=walkers)
        ours = render_batch(codes, probabilities, seeds, device="cuda", **arguments).cpu().numpy()
        differing += [f"W={walkers} maps={maps} {arguments['mode']} code {i}" for i, (c, p, s) in enumerate(zip(codes, probabilities, seeds))
                      if not np.array_equal(ours[i], render(c, p, seed=s, **arguments))]
    assert not differing, f"{len(differing)} images differ, first: {', '.join(differing[:3])}"
