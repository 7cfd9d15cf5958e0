import threading
from pathlib import Path

import numpy as np
import pytest

from fdsml.ifs import (
    FOREGROUND,
    RenderSettings,
    chamfer_distances,
    chaos_game,
    determinant_probabilities,
    occupancy,
    render,
    sample_sigma_factor_code,
)
from fdsml.ifs.render import _lane_scratch, _pixel_scratch, _scratch

from tests.support import ROOT

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
    from fdsml.ifs.render import _orbit, map_thresholds

    size, n = 32, 500
    xs, ys, masks = np.empty(n), np.empty(n), np.empty(n, np.uint16)
    xmin, xmax, ymin, ymax, _ = _orbit(SIERPINSKI, map_thresholds(THIRDS), n, 20, 9, xs, ys, masks, True)
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


def _plain_pixel_indices(xs, ys, frame, size, stride, offset):
    """The framing's definition in Python floats: ``(size - 1 - int(vy) + offset) * stride + int(vx) + offset``."""
    xmin, ymin, sx, sy, cx, cy = frame
    return [
        (size - 1 - int((float(y) - ymin) * sy + cy) + offset) * stride + int((float(x) - xmin) * sx + cx) + offset
        for x, y in zip(xs, ys)
    ]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("stride", "offset"), [(66, 1), (64, 0)])
def test_pixel_indices_truncate_like_int(dtype, stride, offset):
    """The pixel-index pass (float64 truncations, one conversion per point) against ``int`` on the
    edges: exact integers, the values just below and above them, halves, 0 and the image's last
    pixel, both as the coordinates themselves and through a real frame."""
    from fdsml.ifs.render import _pixel_indices, framing

    size = 64
    whole = np.arange(size, dtype=np.float64)
    edges = np.concatenate([whole, np.nextafter(whole + 1, 0), np.nextafter(whole, size), whole + 0.5, [0.0, 5e-324]])
    edges = edges[edges < size].astype(dtype)
    rng = np.random.default_rng(5)
    cases = [(edges, rng.permutation(edges), (0.0, 0.0, 1.0, 1.0, 0.0, 0.0))]
    xs, ys = rng.normal(size=(2, 5000)).astype(dtype)
    xs[:3], ys[:3] = [xs.min(), xs.max(), 0.0], [ys.max(), ys.min(), 0.0]
    cases.append((xs, ys, framing([xs.min(), xs.max(), ys.min(), ys.max()], True, size, 2)))
    for xs, ys, frame in cases:
        pixels = np.empty(xs.shape[0], np.int32)
        _pixel_indices(xs, ys, frame, size, stride, offset, pixels)
        assert pixels.tolist() == _plain_pixel_indices(xs, ys, frame, size, stride, offset)


RENDER_GOLDEN_DIGEST = "ec2bd7bb7ea02983ef947732f2df91a7dd7e0e62c9c7c8fe0d81a96af80d670e"
"""SHA-256 of 96 renderings (24 random codes; 64 and 256 px patch, 37 px patch with margin 1, 48 px
point), computed with the renderer of commit c8742e4. Stored shards, tables filtered by occupancy
and every pre-training result depend on these bytes: a faster renderer must draw the same pixels."""


GOLDEN_CASES = ((64, 4000, "patch", 2), (37, 1500, "patch", 1), (48, 2000, "point", 1), (256, 100_000, "patch", 2))
"""(size, points, mode, margin) of the golden renderings."""

WALKERS_GOLDEN_DIGEST = "4f4a505c661686cb1c7b79edf66f78806c77f84beddb3de4a951ca4d2db92a09"
"""The same renderings with 8 walkers (48 px with 2,001 points: some walkers draw one point more),
computed with the float32 lanes as first written: the Triton kernels are held to the
same definition."""


PAPER_WALKERS = 128
PAPER_WALKERS_GOLDEN_DIGEST = "1d7543d69fd75152eafa71e1c5fbcb7b6bf64c477a4aaf9c57cb0c4a90242cf2"
"""The golden renderings with the published scale's walkers (conf/paper: the pre-training,
validation and analysis images at 256 px / 100,000 points)."""


def golden_digest(walkers: int, cases=GOLDEN_CASES) -> str:
    import hashlib

    from fdsml.ifs import sample_sigma_factor_code

    rng = np.random.default_rng(2026)
    digest = hashlib.sha256()
    for i in range(24):
        code = sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0))
        probabilities = rng.dirichlet(np.ones(code.shape[0]))
        for size, points, mode, margin in cases:
            image = render(code, probabilities, size=size, points=points, seed=1000 + i, mode=mode, margin=margin, walkers=walkers)
            digest.update(image.tobytes())
    return digest.hexdigest()


def test_renderings_keep_their_bytes():
    assert golden_digest(1) == RENDER_GOLDEN_DIGEST


def test_renderings_with_walkers_keep_their_bytes():
    cases = tuple((size, 2001 if size == 48 else points, mode, margin) for size, points, mode, margin in GOLDEN_CASES)
    assert golden_digest(8, cases) == WALKERS_GOLDEN_DIGEST


def test_the_published_scales_walkers_keep_their_bytes():
    import yaml

    paper = yaml.safe_load((ROOT / "conf/paper/parameters_fractals.yml").read_text())
    assert paper["fractals"]["render"]["walkers"] == PAPER_WALKERS
    assert golden_digest(PAPER_WALKERS) == PAPER_WALKERS_GOLDEN_DIGEST


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


def test_walkers_are_independent_samples_of_the_same_attractor():
    walkers, n = 8, 20_003  # not a multiple: the first three walkers draw one point more
    points = chaos_game(SIERPINSKI, THIRDS, points=n, seed=7, walkers=walkers)
    x, y = points[:, 0], points[:, 1]
    assert np.all(y >= -1e-9) and np.all(y <= 2 * x + 1e-9) and np.all(y <= 2 * (1 - x) + 1e-9)
    assert points.dtype == np.float64 and np.array_equal(points, points.astype(np.float32))  # float32 lanes
    shorter = chaos_game(SIERPINSKI, THIRDS, points=8 * 100, seed=7, walkers=walkers)
    np.testing.assert_array_equal(points[: 8 * 100], shorter)  # walker w's i-th point is point i * walkers + w
    other_seed = chaos_game(SIERPINSKI, THIRDS, points=8 * 100, seed=8, walkers=walkers)
    assert not np.array_equal(shorter, other_seed)
    lanes = [points[w::walkers][:50] for w in range(walkers)]
    assert all(not np.array_equal(lanes[a], lanes[b]) for a in range(walkers) for b in range(a))
    again = chaos_game(SIERPINSKI, THIRDS, points=n, seed=7, walkers=walkers)
    np.testing.assert_array_equal(points, again)


def test_one_walker_keeps_the_float64_orbit():
    single = chaos_game(SIERPINSKI, THIRDS, points=500, seed=7)
    assert not np.array_equal(single, single.astype(np.float32).astype(np.float64))
    assert not np.array_equal(single[:50], chaos_game(SIERPINSKI, THIRDS, points=500, seed=7, walkers=2)[::2][:50])


def test_walkers_change_the_bytes_but_not_the_picture():
    one = render(SIERPINSKI, THIRDS, size=64, points=20_000, seed=3, mode="point")
    eight = render(SIERPINSKI, THIRDS, size=64, points=20_000, seed=3, mode="point", walkers=8)
    assert one.tobytes() != eight.tobytes()
    assert abs(occupancy(one) - occupancy(eight)) < 0.01
    assert np.count_nonzero((one > 0) != (eight > 0)) < 0.02 * one.size


def within_noise(differences: np.ndarray) -> bool:
    """Whether paired differences average to zero within three standard errors: indistinguishable."""
    return abs(differences.mean()) < 3 * differences.std(ddof=1) / np.sqrt(differences.size)


def test_walkers_draw_the_pictures_of_one_orbit_within_the_rendering_noise():
    """100 codes drawn as the codes table draws them, at the embedded 64 px / 4,000 points: 8 walkers' Chamfer
    distance to the one-walker rendering is that of another seed's one-walker rendering (the noise floor), and
    the occupancy is the same. Uniform map probabilities or half the points each fail it by 8 standard errors."""
    rng = np.random.default_rng(0)
    codes = [sample_sigma_factor_code(rng, (2, 4), (5.0, 6.0), (-1.0, 1.0)) for _ in range(100)]
    settings = dict(size=64, points=4000, mode="patch")
    reference, floor, walkers = [], [], []
    for i, code in enumerate(codes):
        probabilities = determinant_probabilities(code)
        reference.append(render(code, probabilities, seed=2 * i, **settings))
        floor.append(render(code, probabilities, seed=2 * i + 1, **settings))
        walkers.append(render(code, probabilities, seed=2 * i, walkers=8, **settings))
    noise = chamfer_distances(np.stack(reference), np.stack(floor))
    assert noise.mean() > 0.05  # a floor to be within
    assert within_noise(chamfer_distances(np.stack(reference), np.stack(walkers)) - noise)
    assert within_noise(np.array([occupancy(image) for image in walkers]) - np.array([occupancy(image) for image in reference]))


def test_the_descriptor_validation_agrees_with_one_walker_and_with_eight():
    """The descriptor validation on one codes table rendered with 1 and with 8 walkers (the same triplets, base
    codes and seeds): each filter's agreement inside the other's 95 % interval, the same sweeps."""
    from fdsml.families import family_spec
    from fdsml.families.generation import generate_table
    from fdsml.seeds import generator
    from fdsml.descriptor_validation.agreement import measure_all_filters, summarise_agreement
    from fdsml.descriptor_validation.sweeps import base_codes, run_sweeps, summarise_sweeps, sweep_factors

    params = {"seed": 0, "n_classes": 40, "instances_per_class": 10, "class_filter": {"enabled": False}, "render": {"size": 64, "points": 4000}}
    table, _ = generate_table(family_spec(params))
    results = {}
    for walkers in (1, 8):
        spec = family_spec({**params, "render": {**params["render"], "walkers": walkers}})
        agreement = summarise_agreement(measure_all_filters(table, spec, 300, generator(0, "descriptor_validation", 0)))
        bases, classes = base_codes(table, spec, 5, generator(0, "descriptor_validation", 1))
        points = run_sweeps(bases, classes, sweep_factors((0.6, 1.4), 17), spec, generator(0, "descriptor_validation", 2), 4, True)
        results[walkers] = agreement, summarise_sweeps(points)
    (one, one_sweeps), (eight, eight_sweeps) = results[1], results[8]
    for name, value in one["agreement"].items():
        low, high = eight["agreement_ci95"][name]
        assert low <= value <= high, name
        low, high = one["agreement_ci95"][name]
        assert low <= eight["agreement"][name] <= high, name
    for key in ("n_contractive", "monotone_within_noise_fraction_contractive", "median_spearman_contractive", "n_empty_renderings"):
        assert one_sweeps[key] == eight_sweeps[key], key
    assert one_sweeps["noise_floor_px_median"] == pytest.approx(eight_sweeps["noise_floor_px_median"], rel=0.25)


@pytest.mark.parametrize("walkers", [0, 1025])
def test_walkers_outside_their_range_are_refused(walkers):
    with pytest.raises(ValueError, match="walkers"):
        render(SIERPINSKI, THIRDS, size=32, points=100, seed=0, walkers=walkers)
    with pytest.raises(ValueError, match="walkers"):
        RenderSettings(walkers=walkers)


def in_a_new_thread(function):
    """``function()``'s result, computed in a thread of its own (whose render buffers do not exist yet)."""
    result = {}
    worker = threading.Thread(target=lambda: result.update(value=function()))
    worker.start()
    worker.join()
    return result["value"]


def test_each_thread_keeps_its_own_orbit_buffers_grown_on_demand_and_reused():
    seen = in_a_new_thread(lambda: {"first": _scratch(100), "smaller": _scratch(40), "larger": _scratch(300), "again": _scratch(300)})
    assert [(a.shape, a.dtype) for a in seen["first"]] == [((100,), np.float64), ((100,), np.float64), ((100,), np.uint16)]
    assert all(np.shares_memory(small, first) for small, first in zip(seen["smaller"], seen["first"]))  # reused
    assert [a.shape for a in seen["larger"]] == [(300,)] * 3 and not np.shares_memory(seen["larger"][0], seen["first"][0])
    assert all(np.shares_memory(again, larger) for again, larger in zip(seen["again"], seen["larger"]))
    assert not any(np.shares_memory(mine, theirs) for mine, theirs in zip(_scratch(100), seen["first"]))  # per thread


def test_each_thread_keeps_its_own_lane_and_pixel_buffers():
    def buffers():
        lanes = [_lane_scratch(64), _lane_scratch(32), _lane_scratch(128)]
        pixels = [_pixel_scratch(50, 8, patch=True), _pixel_scratch(20, 8, patch=False)]
        pixels[0][1][...] = 5  # what a rendering leaves in the grid
        pixels.append(_pixel_scratch(80, 8, patch=True))
        return lanes, [(indices, grid.copy()) for indices, grid in pixels[:2]] + [pixels[2], _pixel_scratch(10, 6, patch=True)]

    (first, smaller, larger), pixels = in_a_new_thread(buffers)
    assert [(a.shape, a.dtype) for a in first] == [((64,), np.float32), ((64,), np.float32), ((64,), np.uint16)]
    assert all(a is b for a, b in zip(first, smaller)) and [a.shape for a in larger] == [(128,)] * 3  # at least the length
    (indices, centres), (fewer, _), (more, zeroed), (_, other_grid) = pixels
    assert (indices.shape, indices.dtype, centres.shape, centres.dtype) == ((50,), np.int32, (10, 10), np.uint16)
    assert np.shares_memory(fewer, indices) and fewer.shape == (20,) and more.shape == (80,)
    assert zeroed.shape == (10, 10) and not zeroed.any()  # the same grid, zeroed again for patch mode
    assert other_grid.shape == (8, 8)  # another image size, another grid


@pytest.mark.parametrize("walkers", [1, 4])
def test_renderings_are_the_same_in_a_fresh_thread_as_after_other_renderings(walkers):
    """Buffers kept between calls never leak one rendering into the next: sizes, point counts and modes in turn."""
    code = np.array([[0.5, 0.0, 0.0, 0.5, 0.0, 0.0], [0.5, 0.0, 0.0, 0.5, 0.5, 0.0], [0.5, 0.0, 0.0, 0.5, 0.25, 0.5]])
    weights = determinant_probabilities(code)
    calls = [(32, 500, "patch"), (64, 3000, "patch"), (48, 800, "point"), (48, 800, "patch"), (32, 4000, "patch"), (64, 200, "point")]

    def one(size, points, mode):
        return render(code, weights, size=size, points=points, seed=7, mode=mode, walkers=walkers)

    in_turn = in_a_new_thread(lambda: [one(*call) for call in calls])
    for call, image in zip(calls, in_turn):
        np.testing.assert_array_equal(in_a_new_thread(lambda call=call: one(*call)), image)
        assert image.shape == (call[0], call[0]) and image.any()
