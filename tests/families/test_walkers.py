"""``fractals.render.walkers`` renders the training images; the codes table keeps one walker."""

import numpy as np

from fdsml.families import family_spec
from fdsml.families.generation import generate_table
from fdsml.ifs import render
from tests.support import tiny_fractals

PARAMS = tiny_fractals(seed=3, classes=2, instances=3, points=800, class_filter=None)


def spec(walkers: int):
    return family_spec({**PARAMS, "render": {**PARAMS["render"], "walkers": walkers}})


def test_the_table_is_built_with_one_walker_whatever_renders_the_images():
    one, eight = spec(1), spec(8)
    table, _ = generate_table(one)
    again, _ = generate_table(eight)
    assert table.equals(again)  # occupancy included


def test_the_images_are_rendered_with_the_configured_walkers():
    eight = spec(8)
    table, _ = generate_table(eight)
    row = table.iloc[0]
    instance = eight.instance(row)
    image = eight.render(instance, int(row["seed"]))
    expected = render(instance.coefficients, instance.probabilities, size=32, points=800, seed=int(row["seed"]), walkers=8)
    np.testing.assert_array_equal(image, expected)
    assert image.tobytes() != spec(1).render(instance, int(row["seed"])).tobytes()
