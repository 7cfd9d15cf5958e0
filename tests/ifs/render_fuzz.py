"""Renders thousands of random codes in every mode, and instances of every registered formula family; run in a
subprocess by ``test_render.py::test_no_code_crashes_the_renderer``, so a crash fails that test, not the suite.

The IFS kernel: codes contractive or not, coefficients up to 1e3 in magnitude, extreme probabilities, one
or several walkers, and codes built to overflow the framing (an orbit finite but wider than the
largest float, one too thin for its scale). Every family (a new one too): its own instances on its settings'
defaults, each pushed past its ranges as the family says (``Family.fuzzed``: the orbit families replace
continuous parameters by values up to 1e3). Prints one line per family with its count of renderings, then ``ok``.
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from fdsml.families import get_family, known_families
from fdsml.ifs import MODES, render

WALKERS = (1, 3, 8)
HUGE = 6e307
OVERFLOWING = (
    np.array([[0.5, 0, 0, 0.5, HUGE, 0], [0.5, 0, 0, 0.5, -HUGE, 0]]),  # extent 2.4e308 overflows
    np.array([[0.5, 0, 0, 0.0, 1.0, 1e-320], [0.5, 0, 0, 0.0, 0.0, 0.0]]),  # height 1e-320: its scale overflows
    np.array([[1e3, 1e3, 0, -1e3, 0, 0], [-1e3, 0, 1e3, 1e3, 1, 1]]),  # finite, then inf - inf = NaN
)


def random_code(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n = int(rng.integers(1, 9))
    magnitude = 10.0 ** rng.uniform(-3.0, 3.0, size=(n, 6))
    coefficients = magnitude * rng.choice([-1.0, 1.0], size=(n, 6)) * (rng.random((n, 6)) > 0.1)
    kind = rng.integers(4)
    if kind == 0:
        probabilities = rng.dirichlet(np.full(n, 0.05))
    elif kind == 1:
        probabilities = 10.0 ** rng.uniform(-300.0, 0.0, size=n)
    elif kind == 2:
        probabilities = np.eye(n)[rng.integers(n)]
    else:
        probabilities = rng.random(n) + 1e-12
    return coefficients, probabilities


def fuzz_ifs(rng: np.random.Generator, count: int) -> int:
    codes = [(code, np.full(code.shape[0], 1 / code.shape[0])) for code in OVERFLOWING]
    codes += [random_code(rng) for _ in range(count)]
    rendered = 0
    for i, (coefficients, probabilities) in enumerate(codes):
        for mode in MODES:
            for size, margin in ((32, 1), (19, 2)):
                image = render(coefficients, probabilities, size=size, points=int(rng.integers(1, 3000)), seed=i, mode=mode, margin=margin, walkers=int(rng.choice(WALKERS)))
                assert image.shape == (size, size) and image.dtype == np.uint8
                rendered += 1
    for index, coefficients in enumerate(OVERFLOWING):
        for walkers in WALKERS:
            if index == 1 and walkers > 1:
                continue  # float32 lanes: a height of 1e-320 is 0, a degenerate axis that is framed
            image = render(coefficients, np.full(coefficients.shape[0], 0.5), size=32, points=2000, seed=0, walkers=walkers)
            assert not image.any(), "an orbit that cannot be framed renders empty"
    return rendered


def fuzz_family(name: str, rng: np.random.Generator, count: int) -> int:
    family = get_family(name)
    settings = family.parse_settings({}, f"fractals.{name}")
    rendered = 0
    while rendered < count:
        instance = family.perturb(family.sample_class(rng, settings, Counter()), rng, settings)
        if instance is None:  # a draw its validity rules reject
            continue
        stressed, rendering = family.fuzzed(instance, rng, settings)
        image = family.render(stressed, rendering, rendered)
        size = family.image_size(rendering)
        assert image.dtype == np.uint8 and image.shape == (size, size), (name, image.dtype, image.shape)
        rendered += 1
    return rendered


def main(count: int) -> None:
    rng = np.random.default_rng(24)
    print("ifs kernel", fuzz_ifs(rng, count), flush=True)
    for name in known_families():
        print(name, fuzz_family(name, rng, count // 10), flush=True)
    print("ok")


if __name__ == "__main__":
    main(int(sys.argv[1]))
