import pytest

from fdsml.families import register_family, unregister_family

from .discs import DISCS


@pytest.fixture
def discs():
    """The test family, registered for the test only."""
    register_family(DISCS)
    yield DISCS
    unregister_family(DISCS.name)
