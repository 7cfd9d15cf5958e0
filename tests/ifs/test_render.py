import numpy as np
import pytest

from fdsml.ifs import FOREGROUND, RenderSettings, chaos_game, occupancy, render

from .render_fuzz import OVERFLOWING

SIERPINSKI = np.array(
    [
        [0.5, 0.0, 0.0, 0.5, 0.0, 0.0],
        [0.5, 0.0, 0.0, 0.5, 0.5, 0.0],
        [0.5, 0.0, 0.0, 0.5, 0.25, 0.5],
    ]
)
THIRDS = np.full(3, 1 / 3)


def test_sierpinski_orbit_lies_on_the_attractor():
    points = chaos_game(SIERPINSKI, THIRDS, points=20_000, seed=7)
    x, y = points[:, 0], points[:, 1]
    # inside the triangle (0,0) (1,0) (0.5,1)
    assert np.all(y >= -1e-9) and np.all(y <= 2 * x + 1e-9) and np.all(y <= 2 * (1 - x) + 1e-9)
    # never inside the removed middle triangle (0.5,0) (0.25,0.5) (0.75,0.5), away from its edges
    inside_hole = (y < 0.5 - 0.01) & (y > 2 * (0.5 - x) + 0.01) & (y > 2 * (x - 0.5) + 0.01)
    assert not inside_hole.any()
    # all three corners are visited
    for corner in ([0, 0], [1, 0], [0.5, 1]):
        assert np.min(np.linalg.norm(points - corner, axis=1)) < 0.01


def test_sierpinski_rendering_frames_the_triangle():
    size, margin = 64, 2
    image = render(SIERPINSKI, THIRDS, size=size, points=50_000, seed=1, mode="point", margin=margin)
    rows, cols = np.nonzero(image)
    assert set(np.unique(image)) == {0, FOREGROUND}
    # the cloud is stretched to the margins on both axes
    assert rows.min() == margin and rows.max() == size - 1 - margin
    assert cols.min() == margin and cols.max() == size - 1 - margin
    # apex at the top centre, base along the bottom row, hole in the middle
    assert abs(cols[rows == margin].mean() - (size - 1) / 2) <= 1.5
    assert np.count_nonzero(image[size - 1 - margin]) > size // 2
    assert image[size // 2 + 6, size // 2] == 0


def test_same_seed_same_bytes_and_different_seeds_differ():
    for mode in ("point", "patch"):
        first = render(SIERPINSKI, THIRDS, size=48, points=3000, seed=11, mode=mode)
        again = render(SIERPINSKI, THIRDS, size=48, points=3000, seed=11, mode=mode)
        other = render(SIERPINSKI, THIRDS, size=48, points=3000, seed=12, mode=mode)
        assert first.tobytes() == again.tobytes()
        assert first.tobytes() != other.tobytes()


def test_patch_mode_stamps_three_by_three_patterns():
    point = render(SIERPINSKI, THIRDS, size=64, points=300, seed=3, mode="point")
    patch = render(SIERPINSKI, THIRDS, size=64, points=300, seed=3, mode="patch")
    # every drawn patch pixel is within one pixel of a point-mode pixel, and points are covered
    rows, cols = np.nonzero(patch)
    near = np.zeros_like(point, dtype=bool)
    for dr in (-1, 0, 1):
        for dc in (-1, 0, 1):
            near |= np.roll(np.roll(point > 0, dr, axis=0), dc, axis=1)
    assert near[rows, cols].all()
    assert occupancy(patch) > occupancy(point)


@pytest.mark.parametrize("margin", [2, 1])
def test_patch_mode_equals_stamping_each_point(margin):
    """The two-pass rasteriser draws exactly the pixels of a point-by-point 3x3 stamp, the image's
    border included (a margin of 1 lets patches reach the first and last rows and columns)."""
    from fdsml.ifs.render import _orbit, _thresholds

    size, n = 32, 500
    xs, ys, masks = np.empty(n), np.empty(n), np.empty(n, np.uint16)
    xmin, xmax, ymin, ymax = _orbit(SIERPINSKI, _thresholds(THIRDS), n, 20, 9, xs, ys, masks, True)
    expected = np.zeros((size, size), np.uint8)
    usable = size - 1 - 2 * margin
    for x, y, mask in zip(xs, ys, masks):
        col = int((x - xmin) * usable / (xmax - xmin) + margin + 0.5)
        row = size - 1 - int((y - ymin) * usable / (ymax - ymin) + margin + 0.5)
        for bit in range(9):
            if mask >> bit & 1:
                expected[row + bit // 3 - 1, col + bit % 3 - 1] = FOREGROUND
    actual = render(SIERPINSKI, THIRDS, size=size, points=n, seed=9, mode="patch", margin=margin)
    np.testing.assert_array_equal(actual, expected)
    assert np.all((masks >= 1) & (masks <= 511))
    border = np.concatenate([expected[0], expected[-1], expected[:, 0], expected[:, -1]])
    assert np.count_nonzero(border) > 0 if margin == 1 else np.count_nonzero(border) == 0


RENDER_GOLDEN_DIGEST = "ec2bd7bb7ea02983ef947732f2df91a7dd7e0e62c9c7c8fe0d81a96af80d670e"
"""SHA-256 of 96 renderings (24 random codes; 64 and 256 px patch, 37 px patch with margin 1, 48 px
point), computed with the renderer of commit c8742e4. Stored shards, tables filtered by occupancy
and every pre-training result depend on these bytes: a faster renderer must draw the same pixels."""


def test_renderings_keep_their_bytes():
    import hashlib

    from fdsml.ifs import sample_sigma_factor_code

    rng = np.random.default_rng(2026)
    digest = hashlib.sha256()
    for i in range(24):
        code = sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0))
        probabilities = rng.dirichlet(np.ones(code.shape[0]))
        for size, points, mode, margin in ((64, 4000, "patch", 2), (37, 1500, "patch", 1), (48, 2000, "point", 1), (256, 100_000, "patch", 2)):
            digest.update(render(code, probabilities, size=size, points=points, seed=1000 + i, mode=mode, margin=margin).tobytes())
    assert digest.hexdigest() == RENDER_GOLDEN_DIGEST


def test_diverging_code_renders_empty():
    expanding = np.array([[1.5, 0.0, 0.0, 1.5, 1.0, 1.0], [1.2, 0.3, 0.0, 1.2, 0.0, 1.0]])
    image = render(expanding, [0.5, 0.5], size=32, points=5000, seed=0)
    assert occupancy(image) == 0.0


def test_degenerate_axis_is_centred():
    line = np.array([[0.5, 0.0, 0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0, 0.5, 0.0]])
    image = render(line, [0.5, 0.5], size=32, points=2000, seed=0, mode="point")
    rows, _ = np.nonzero(image)
    assert set(rows) == {32 - 1 - 16}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(mode="splat"), "mode"),
        (dict(size=4), "size"),
        (dict(points=0), "points"),
        (dict(seed=-1), "seed"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    arguments = dict(size=32, points=100, seed=0) | kwargs
    with pytest.raises(ValueError, match=message):
        render(SIERPINSKI, THIRDS, **arguments)


def test_render_settings_forward_their_values():
    settings = RenderSettings(size=40, points=500, mode="point", margin=3, burn_in=5)
    direct = render(SIERPINSKI, THIRDS, size=40, points=500, seed=4, mode="point", margin=3, burn_in=5)
    np.testing.assert_array_equal(settings.render(SIERPINSKI, THIRDS, 4), direct)


def test_rendering_is_identical_in_another_process():
    import subprocess
    import sys

    script = (
        "import numpy as np, sys; from fdsml.ifs import render; "
        "c = np.array(%r); sys.stdout.write(render(c, [1/3]*3, size=40, points=2000, seed=99).tobytes().hex())"
        % SIERPINSKI.tolist()
    )
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    here = render(SIERPINSKI, THIRDS, size=40, points=2000, seed=99)
    assert bytes.fromhex(other) == here.tobytes()


def test_no_code_crashes_the_renderer():
    """Thousands of random codes (contractive or not, coefficients up to 1e3, extreme probabilities,
    orbits finite but too wide or too thin to frame) in every mode and family, in a subprocess: a
    pixel index outside the image used to kill the process with a segmentation fault."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("render_fuzz.py")
    done = subprocess.run([sys.executable, str(script), "2000"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert done.stdout.splitlines()[-1] == "ok"


def test_orbits_that_cannot_be_framed_render_empty():
    for coefficients in OVERFLOWING:
        for mode in ("point", "patch"):
            assert not render(coefficients, [0.5, 0.5], size=32, points=2000, seed=0, mode=mode).any()


def test_sizes_beyond_32_bit_indices_are_refused():
    with pytest.raises(ValueError, match="size"):
        render(SIERPINSKI, THIRDS, size=50_000, points=10, seed=0)
