"""Orbit geometry against hand-computed cases (fdsml.families.orbits)."""

import numpy as np
import pytest

from fdsml.families.orbits import draw_segment, render_orbits, stroke_pixels

SIZE = 512
CENTRE = (250.0, 262.0)


def orbits(size=SIZE, stroke=1.0, seed=3, **geometry):
    defaults = dict(
        vertices=720, orbits=1, amplitude=0.0, line_width=0.0, radius=60.0, oval_x=1.5, oval_y=1.2, n1=0, n2=0,
        centre_x=CENTRE[0], centre_y=CENTRE[1],
    )
    defaults.update(geometry)
    return render_orbits(
        size=size, seed=seed, background=0, greys=(1, 255), noise_gain=1.0, noise_cells=16, stroke=stroke, **defaults
    )


def ellipse_points(semi_x, semi_y, n=20_000):
    theta = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.stack([CENTRE[0] + semi_x * np.cos(theta), CENTRE[1] + semi_y * np.sin(theta)], axis=1)


def nearest(points, targets):
    """Distance from each point to the nearest target."""
    return np.array([np.min(np.hypot(*(targets - p).T)) for p in points])


def drawn_pixels(image):
    rows, cols = np.nonzero(image)
    return np.stack([cols, rows], axis=1).astype(float)


def test_single_orbit_without_noise_is_the_exact_oval():
    image = orbits()
    pixels = drawn_pixels(image)
    curve = ellipse_points(60 * 1.5, 60 * 1.2)
    # every drawn pixel lies on the oval (rounding to the pixel grid: within half a diagonal) ...
    assert nearest(pixels, curve).max() <= 0.75
    # ... and the oval is drawn without gaps
    assert nearest(curve[::20], pixels).max() <= 0.75
    assert len(np.unique(image[image > 0])) == 1  # one orbit, one grey level


def test_the_line_width_is_an_outward_step_per_orbit():
    pixels = drawn_pixels(orbits(line_width=4.0))
    assert nearest(pixels, ellipse_points(60 * 1.5 + 4, 60 * 1.2 + 4)).max() <= 0.75


def test_the_stroke_sets_the_drawn_thickness_scaled_to_the_image_size():
    assert stroke_pixels(1.0, 224) == 1 and stroke_pixels(1.0, 1024) == 2 and stroke_pixels(5.0, 512) == 5
    thin, thick = orbits(), orbits(stroke=5.0)
    curve = ellipse_points(60 * 1.5, 60 * 1.2)
    assert nearest(drawn_pixels(thick), curve).max() <= 2.5 * np.sqrt(2) + 0.75
    # a 5 x 5 square stamp: 5 pixels across along the axes, up to 5 sqrt 2 along the diagonals
    assert 4.5 < np.count_nonzero(thick) / np.count_nonzero(thin) < 5 * np.sqrt(2)


def test_three_lobes_from_the_first_wave_frequency_without_noise():
    """A = 0, o_x = o_y = 1, n1 = 3, n2 = 0: orbit k has radius r + k * 0.5 sin(3 theta); the
    outermost orbit's radius, read off the image by angle, has three maxima where sin 3 theta = 1."""
    k, radius = 20, 80.0
    image = orbits(orbits=k, radius=radius, oval_x=1.0, oval_y=1.0, n1=3, n2=0)
    pixels = drawn_pixels(image)
    dx, dy = pixels[:, 0] - CENTRE[0], pixels[:, 1] - CENTRE[1]
    angle, distance = np.arctan2(dy, dx) % (2 * np.pi), np.hypot(dx, dy)
    bins = 180
    outer = np.zeros(bins)
    np.maximum.at(outer, (angle / (2 * np.pi) * bins).astype(int) % bins, distance)
    theta = (np.arange(bins) + 0.5) * 2 * np.pi / bins
    expected = radius + k * np.maximum(0.5 * np.sin(3 * theta), 0.0)  # the outermost orbit is the kth where sin > 0
    assert np.abs(outer - expected).max() <= 1.5
    lobes = outer > radius + k * 0.25
    starts = np.flatnonzero(lobes & ~np.roll(lobes, 1))
    assert len(starts) == 3
    peaks = [theta[np.argmax(np.where(lobes & (np.abs(theta - peak) < 0.5), outer, 0))] for peak in (np.pi / 6, 5 * np.pi / 6, 3 * np.pi / 2)]
    assert np.allclose(peaks, [np.pi / 6, 5 * np.pi / 6, 3 * np.pi / 2], atol=0.1)


def test_without_waves_noise_or_steps_every_orbit_is_the_starting_oval():
    assert np.array_equal(orbits(orbits=7) > 0, orbits(orbits=1) > 0)


def test_noise_moves_the_orbits_off_the_oval():
    pixels = drawn_pixels(orbits(amplitude=4.0))
    # the first step moves every vertex out by A (1 - P), P in [-0.5, 0.5]: between 2 and 6 reference pixels
    distance = nearest(pixels[::7], ellipse_points(60 * 1.5, 60 * 1.2))
    assert distance.min() >= 1.0 and distance.max() <= 6.0 * 1.5 + 1


def test_segment_is_clipped_to_the_image():
    image = np.zeros((64, 64), np.uint8)
    draw_segment(image, -100.0, 10.0, 600.0, 10.0, 1, np.uint8(9))
    assert np.array_equal(np.flatnonzero(image.any(axis=1)), [10]) and np.all(image[10] == 9)
    draw_segment(image, -100.0, -5.0, 600.0, -5.0, 1, np.uint8(9))  # wholly above the image
    draw_segment(image, 1e9, 1e9, 2e9, -1e9, 1, np.uint8(9))
    assert np.count_nonzero(image) == 64


@pytest.mark.parametrize("size", [64, 224])
def test_an_orbit_off_the_image_draws_nothing(size):
    assert not orbits(size=size, centre_x=5000.0).any()


def test_geometry_scales_with_the_image_size():
    small, large = drawn_pixels(orbits(size=128)), drawn_pixels(orbits(size=SIZE))
    assert np.allclose(small.mean(axis=0) * SIZE / 128, large.mean(axis=0), atol=2.0)
    assert np.allclose(np.ptp(small, axis=0) * SIZE / 128, np.ptp(large, axis=0), atol=4.0)


def test_a_thick_oval_across_the_image_border_is_clipped_not_wrapped():
    image = orbits(stroke=9.0, centre_x=0.0, centre_y=0.0)
    pixels = drawn_pixels(image)
    assert len(pixels) > 0
    # only the quarter of the oval inside the image, thick, and nothing wrapped to the far sides
    distance_to_oval = np.abs(np.hypot(pixels[:, 0] / (60 * 1.5), pixels[:, 1] / (60 * 1.2)) - 1) * 60 * 1.2
    assert distance_to_oval.max() <= 4.5 * np.sqrt(2) + 1
    assert pixels.max() < 60 * 1.5 + 6


def test_a_rendering_outside_its_domain_is_refused_naming_the_value():
    assert orbits(size=1).shape == (1, 1)
    for geometry, message in [
        ({"size": 0}, "size must be positive, got 0"),
        ({"seed": 2**63}, r"seed must lie in \[0, 2\*\*63\), got 9223372036854775808"),
        ({"seed": -1}, r"seed must lie in \[0, 2\*\*63\), got -1"),
        ({"vertices": 2}, "need vertices >= 3 and orbits >= 0, got vertices=2, orbits=1"),
        ({"orbits": -1}, "need vertices >= 3 and orbits >= 0, got vertices=720, orbits=-1"),
    ]:
        with pytest.raises(ValueError, match=message):
            orbits(**geometry)
    assert orbits(seed=2**63 - 1, orbits=0).max() == 0  # the last seed accepted; no orbit draws nothing
