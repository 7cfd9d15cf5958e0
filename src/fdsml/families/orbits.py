"""Noisy concentric orbits drawn as closed polylines, in Numba: the renderer of VisualAtom and RCDB.

Geometry lives in a 512-pixel reference frame (the original renderers' default image) and is
scaled by ``size / 512``, so one instance is the same picture at every size. Vertex v of V sits
at angle theta_v = 2 pi v / V. Before the first orbit it is at

    x_0 = c_x + r cos(theta) o_x,    y_0 = c_y + r sin(theta) o_y

and each orbit k = 1 .. K moves every vertex radially, along (cos theta, sin theta), by

    dx_k = A (1 - g P^x_k(theta)) + w(theta) + l,   w(theta) = 0.5 sin(n1 theta) + 0.5 sin(n2 theta)

(dy_k likewise with its own noise curve P^y_k), then draws the closed polyline of the moved
vertices in orbit k's grey level. The shifts accumulate: orbit k lies sum_{j <= k} of them out
from the starting oval. A is the noise amplitude, g the noise gain (1 for VisualAtom, 2 for
RCDB), l the "line width" (in the original scripts a constant outward step per orbit, not a
stroke width), P one periodic Perlin curve (:mod:`fdsml.families.perlin`) per orbit and axis
sampled at t = cells * theta / 2 pi (the original scripts call ``pnoise1`` at an independent
random point per vertex, noise uncorrelated along the orbit; one smooth periodic curve per orbit
keeps the orbits smooth closed curves, with ``cells`` setting the noise's wavelength). With A = 0, l = 0 and n1 = n2 = 0 every orbit is the
starting oval; with A = 0, o_x = o_y = 1, n1 = 3 and n2 = 0 orbit k's radius is
r + k (l + 0.5 sin 3 theta): three lobes.

Streams of the rendering seed: 2k and 2k + 1 are orbit k's noise curves; stream 2K + 1 (K the
number of orbits) holds the grey levels, draw k for orbit k. Lines are one-pixel DDA paths
between rounded vertices (segments clipped to the image first), stamped with a
``thickness`` x ``thickness`` square (:func:`draw_segment`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from fdsml.families.perlin import fill_gradients, lattice, noise_at, seed_key, unit_uniform
from fdsml.seeds import SEED_LIMIT

REFERENCE_SIZE = 512
"""Side of the frame the geometry is defined in (the original renderers' image size)."""


@nb.njit(cache=True, inline="always")
def _clip(p, q, t0, t1):
    """One Liang-Barsky boundary test: the updated parameter interval (empty when t0 > t1)."""
    if p == 0.0:
        return (t0, t1) if q >= 0.0 else (1.0, 0.0)
    t = q / p
    if p < 0.0:
        return max(t0, t), t1
    return t0, min(t1, t)


@nb.njit(cache=True, inline="always")
def _walk(image, c0, r0, c1, r1, include_end, thickness, grey):
    """DDA from pixel (c0, r0) towards (c1, r1) over n = max(|d col|, |d row|) steps, the end pixel
    only with ``include_end`` (a single pixel always), each stamped with a ``thickness`` square."""
    size = image.shape[0]
    n = max(abs(c1 - c0), abs(r1 - r0))
    count = n + 1 if include_end or n == 0 else n
    inverse = 1.0 / max(n, 1)
    step_c = (c1 - c0) * inverse
    step_r = (r1 - r0) * inverse
    shift = thickness + 2  # pixels here are >= -thickness - 1: truncation after the shift is floor
    base_c = c0 + shift + 0.5
    base_r = r0 + shift + 0.5
    if thickness == 1:
        for i in range(count):
            c = int(base_c + i * step_c) - shift
            r = int(base_r + i * step_r) - shift
            if 0 <= r < size and 0 <= c < size:
                image[r, c] = grey
        return
    half = (thickness - 1) // 2
    for i in range(count):
        c = int(base_c + i * step_c) - shift - half
        r = int(base_r + i * step_r) - shift - half
        image[max(r, 0) : max(r + thickness, 0), max(c, 0) : max(c + thickness, 0)] = grey


@nb.njit(cache=True, inline="always")
def _pixel(value, shift):
    """round(value) for value > -shift - 0.5 (truncation after the shift is floor)."""
    return int(value + (shift + 0.5)) - shift


@nb.njit(cache=True)
def draw_segment(image, x0, y0, x1, y1, thickness, grey):
    """Draw the segment from (x0, y0) to (x1, y1), in pixel units (x the column).

    The segment is clipped to the image (widened by the stroke) with Liang-Barsky, its ends
    rounded to pixels, and walked with a DDA (:func:`_walk`). The end pixel is left to the next
    segment of the polyline, which starts there, unless the segment was clipped at its end. A
    segment inside the image is never clipped, so its pixels depend on its rounded ends only.
    """
    low = -float(thickness)
    high = image.shape[0] - 1.0 + thickness
    dx = x1 - x0
    dy = y1 - y0
    t0, t1 = _clip(-dx, x0 - low, 0.0, 1.0)
    t0, t1 = _clip(dx, high - x0, t0, t1)
    t0, t1 = _clip(-dy, y0 - low, t0, t1)
    t0, t1 = _clip(dy, high - y0, t0, t1)
    if t0 > t1:
        return
    shift = thickness + 1  # clipped coordinates are >= -thickness
    c0 = _pixel(x0 + t0 * dx, shift)
    r0 = _pixel(y0 + t0 * dy, shift)
    _walk(image, c0, r0, _pixel(x0 + t1 * dx, shift), _pixel(y0 + t1 * dy, shift), t1 < 1.0, thickness, grey)


@nb.njit(cache=True, nogil=True)
def draw_orbits(
    image,
    vertices,
    orbits,
    amplitude,
    noise_gain,
    line_width,
    radius,
    oval_x,
    oval_y,
    n1,
    n2,
    centre_x,
    centre_y,
    cells,
    thickness,
    grey_low,
    grey_high,
    seed,
):
    """Draw ``orbits`` orbits into ``image`` (module docstring), grey levels uniform in [grey_low, grey_high]."""
    scale = image.shape[0] / REFERENCE_SIZE
    key = seed_key(seed)
    step = 2.0 * np.pi / vertices
    cos_t = np.empty(vertices)
    sin_t = np.empty(vertices)
    wave = np.empty(vertices)
    t = np.empty(vertices)
    x = np.empty(vertices)
    y = np.empty(vertices)
    for v in range(vertices):
        theta = step * v
        cos_t[v] = np.cos(theta)
        sin_t[v] = np.sin(theta)
        wave[v] = 0.5 * np.sin(n1 * theta) + 0.5 * np.sin(n2 * theta) + line_width
        t[v] = cells * v / vertices
        x[v] = centre_x + radius * oval_x * cos_t[v]
        y[v] = centre_y + radius * oval_y * sin_t[v]
    index = np.empty(vertices, np.int64)
    offset = np.empty(vertices)
    blend = np.empty(vertices)
    lattice(t, cells, index, offset, blend)
    gradients_x = np.empty(cells)
    gradients_y = np.empty(cells)
    inside = np.empty(vertices, np.bool_)
    cols = np.empty(vertices, np.int64)
    rows = np.empty(vertices, np.int64)
    last = image.shape[0] - 1.0
    levels = grey_high - grey_low + 1
    gain = amplitude * noise_gain
    for k in range(orbits):
        fill_gradients(key, 2 * k, gradients_x)
        fill_gradients(key, 2 * k + 1, gradients_y)
        grey = np.uint8(grey_low + min(int(unit_uniform(key, 2 * orbits + 1, k) * levels), levels - 1))
        for v in range(vertices):
            i = index[v]
            f = offset[v]
            s = blend[v]
            x[v] += cos_t[v] * (amplitude - gain * noise_at(gradients_x, i, f, s) + wave[v])
            y[v] += sin_t[v] * (amplitude - gain * noise_at(gradients_y, i, f, s) + wave[v])
            inside[v] = 0.0 <= x[v] * scale <= last and 0.0 <= y[v] * scale <= last
            cols[v] = _pixel(x[v] * scale, 0) if inside[v] else 0
            rows[v] = _pixel(y[v] * scale, 0) if inside[v] else 0
        for v in range(vertices):
            w = v + 1 if v + 1 < vertices else 0
            if inside[v] and inside[w]:
                _walk(image, cols[v], rows[v], cols[w], rows[w], False, thickness, grey)
            else:
                draw_segment(image, x[v] * scale, y[v] * scale, x[w] * scale, y[w] * scale, thickness, grey)


@dataclass(frozen=True)
class Style:
    """How a family paints its orbits: the background, the range of orbit grey levels, the noise gain g."""

    background: int
    greys: tuple[int, int]
    noise_gain: float


def render_instance(instance, style: Style, settings, seed: int, size: int | None = None) -> np.ndarray:
    """An instance of an orbit family (its geometry as attributes; one without ``n1``, ``n2`` has no
    wave) as a ``(size, size)`` uint8 image, ``settings.size`` by default."""
    return render_orbits(
        size=settings.size if size is None else size,
        seed=seed,
        background=style.background,
        greys=style.greys,
        noise_gain=style.noise_gain,
        noise_cells=settings.noise_cells,
        stroke=settings.stroke,
        vertices=instance.vertices,
        orbits=instance.orbits,
        amplitude=instance.amplitude,
        line_width=instance.line_width,
        radius=instance.radius,
        oval_x=instance.oval_x,
        oval_y=instance.oval_y,
        n1=getattr(instance, "n1", 0),
        n2=getattr(instance, "n2", 0),
        centre_x=instance.centre_x,
        centre_y=instance.centre_y,
    )


def stroke_pixels(stroke: float, size: int) -> int:
    """Drawn line thickness in pixels: ``stroke`` reference pixels scaled to ``size``, at least one."""
    return max(1, int(round(stroke * size / REFERENCE_SIZE)))


def render_orbits(
    *,
    size: int,
    seed: int,
    background: int,
    greys: tuple[int, int],
    noise_gain: float,
    noise_cells: int,
    stroke: float,
    vertices: int,
    orbits: int,
    amplitude: float,
    line_width: float,
    radius: float,
    oval_x: float,
    oval_y: float,
    n1: int,
    n2: int,
    centre_x: float,
    centre_y: float,
) -> np.ndarray:
    """A ``(size, size)`` uint8 image of the orbits on ``background`` (module docstring)."""
    if size < 1:
        raise ValueError(f"size must be positive, got {size}")
    if not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"seed must lie in [0, 2**63), got {seed}")
    if vertices < 3 or orbits < 0:
        raise ValueError(f"need vertices >= 3 and orbits >= 0, got vertices={vertices}, orbits={orbits}")
    image = np.full((size, size), background, dtype=np.uint8)
    draw_orbits(
        image,
        int(vertices),
        int(orbits),
        float(amplitude),
        float(noise_gain),
        float(line_width),
        float(radius),
        float(oval_x),
        float(oval_y),
        int(n1),
        int(n2),
        float(centre_x),
        float(centre_y),
        int(noise_cells),
        stroke_pixels(stroke, size),
        int(greys[0]),
        int(greys[1]),
        int(seed),
    )
    return image
