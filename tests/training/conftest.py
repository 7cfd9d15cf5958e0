"""A tiny FineFractalDB shared by the training tests."""

import pytest

from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig, RenderSettings
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb

TINY_FRACTALS = FineFractalDBConfig(
    seed=5,
    n_classes=3,
    instances_per_class=6,
    render=RenderSettings(size=32, points=600),
    class_filter=ClassFilter(size=96, points=4000),
)
TINY_SPEC = FamilySpec(FINEFRACTALDB, TINY_FRACTALS)


@pytest.fixture(scope="session")
def tiny_table():
    table, _ = generate_finefractaldb(TINY_FRACTALS)
    return table
