"""The docs' sample outputs are produced by the commands they show (``tests/project/docs_samples.py`` writes them anew)."""

import pytest

from tests.project.docs_samples import produce, samples
from tests.project.pages import PAGES
from tests.support import ROOT

FOUND = [(page.relative_to(ROOT).as_posix(), found[1], found[2]) for page in PAGES for found in samples(page.read_text())]


def test_the_docs_hold_samples_of_the_plan():
    assert any(command.startswith("python -m fdsml.plan --env paper") for _, command, _ in FOUND)


@pytest.mark.parametrize(("page", "command", "shown"), FOUND)
def test_every_sample_output_is_what_its_command_prints(page, command, shown):
    assert produce(command) == shown, f"{page}: `{command}` prints otherwise; run `python -m tests.project.docs_samples` to write it"
