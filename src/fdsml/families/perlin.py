"""Seeded, periodic 1-D Perlin (gradient) noise in Numba, with no global random state.

A noise curve is a ring of ``cells`` gradients g_0 .. g_{cells-1}, each U[-1, 1], drawn from a
counter-based SplitMix64 stream keyed by ``(seed, stream)``; so the same seed and stream give
the same curve in any process, and any curve can be drawn alone. At t in [0, cells):

    i = floor(t),  f = t - i,  s = 6 f^5 - 15 f^4 + 10 f^3
    n(t) = (1 - s) * g_i * f + s * g_{(i + 1) mod cells} * (f - 1)

n is zero at every lattice point, twice continuously differentiable, periodic with period
``cells`` (so a closed orbit sampled at t = cells * theta / 2 pi closes without a seam) and
lies in [-0.5, 0.5], the range of the ``noise`` package's ``pnoise1`` the original renderers use.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from fdsml.ifs.render import GOLDEN_GAMMA, splitmix64

_S11 = np.uint64(11)
_S32 = np.uint64(32)
_UNIT = 2.0**-53


@nb.njit(cache=True)
def seed_key(seed):
    """The stream key of ``seed``: every draw of one rendering derives from it."""
    return splitmix64(np.uint64(seed) + GOLDEN_GAMMA)


@nb.njit(cache=True, inline="always")
def unit_uniform(key, stream, index):
    """Draw ``index`` of stream ``stream`` under ``key``: a float in [0, 1)."""
    counter = (np.uint64(stream) << _S32) + np.uint64(index) + np.uint64(1)
    return float(splitmix64(key + counter * GOLDEN_GAMMA) >> _S11) * _UNIT


@nb.njit(cache=True)
def fill_gradients(key, stream, gradients):
    """The ring of gradients of stream ``stream``: U[-1, 1] each, written into ``gradients``."""
    for j in range(gradients.shape[0]):
        gradients[j] = 2.0 * unit_uniform(key, stream, j) - 1.0


@nb.njit(cache=True)
def lattice(t, cells, index, offset, blend):
    """Per sample t: its cell ``index``, the ``offset`` f in the cell and the fade ``blend`` s.

    These depend on the sample positions only, so a renderer that evaluates many curves at the
    same positions computes them once.
    """
    for v in range(t.shape[0]):
        position = t[v] % cells
        i = int(np.floor(position))
        f = position - i
        index[v] = i % cells
        offset[v] = f
        blend[v] = f * f * f * (f * (f * 6.0 - 15.0) + 10.0)


@nb.njit(cache=True, inline="always")
def noise_at(gradients, i, f, s):
    """n(t) for a sample precomputed by :func:`lattice`."""
    following = i + 1 if i + 1 < gradients.shape[0] else 0
    return (1.0 - s) * gradients[i] * f + s * gradients[following] * (f - 1.0)


@nb.njit(cache=True)
def _curve(seed, stream, cells, t, out):
    gradients = np.empty(cells)
    fill_gradients(seed_key(seed), stream, gradients)
    index = np.empty(t.shape[0], np.int64)
    offset = np.empty(t.shape[0])
    blend = np.empty(t.shape[0])
    lattice(t, cells, index, offset, blend)
    for v in range(t.shape[0]):
        out[v] = noise_at(gradients, index[v], offset[v], blend[v])


def perlin_curve(seed: int, stream: int, cells: int, t) -> np.ndarray:
    """Noise curve ``stream`` of ``seed`` with ``cells`` lattice cells, evaluated at ``t`` (any reals)."""
    if cells < 1:
        raise ValueError(f"cells must be >= 1, got {cells}")
    t = np.ascontiguousarray(t, dtype=np.float64)
    out = np.empty_like(t)
    _curve(seed, stream, cells, t, out)
    return out
