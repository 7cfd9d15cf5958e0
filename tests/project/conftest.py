"""The TINY chain after ``dvc repro``, built once a session: the DVC suites (test_dvc, test_dvc_ssh_remote) each
work on their own copy of it (tests.dvc_chain.copy_of_chain), never on it."""

import pytest

from tests.dvc_chain import tiny_chain


@pytest.fixture(scope="session")
def built_tiny_chain(tmp_path_factory):
    """The repository and ``dvc repro``'s output (which stages ran)."""
    built = tmp_path_factory.mktemp("tiny_chain")
    return built, tiny_chain(built)
