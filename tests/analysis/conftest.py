"""A tiny FineFractalDB table, generated with the project's own generator."""

import pytest

from fdsml.ifs.finefractaldb import ClassFilter, FineFractalDBConfig
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb
from fdsml.ifs.render import RenderSettings

RENDER = RenderSettings(size=32, points=800)
CONFIG = FineFractalDBConfig(seed=5, n_classes=4, instances_per_class=6, class_filter=ClassFilter(enabled=False), render=RENDER)
SPEC = FamilySpec(FINEFRACTALDB, CONFIG)


@pytest.fixture(scope="session")
def tiny_table():
    table, _ = generate_finefractaldb(CONFIG)
    return table
