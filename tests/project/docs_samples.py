"""The docs' sample outputs of ``python -m fdsml.plan``: each is what the command above it prints.

A sample is a fenced block whose first line is ``$ python -m fdsml.plan ...``; the rest of the block is the
command's output. ``tests/project/test_docs_samples.py`` compares every sample with a fresh run; after a change
that moves the numbers, ``python -m tests.project.docs_samples`` (from the project's root) writes them anew.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

from tests.project.pages import PAGES
from tests.support import ROOT

SAMPLE = re.compile(r"^```text\n\$ (python -m fdsml\.plan[^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def samples(text: str) -> list[re.Match]:
    """The page's samples: group 1 the command, group 2 the output shown."""
    return list(SAMPLE.finditer(text))


def produce(command: str) -> str:
    """What ``command`` prints, run in-process from the project's root as the docs show it."""
    from fdsml.plan import main

    args = shlex.split(command)[3:]
    out = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out):
        main(args + ["--conf-source", str(ROOT / "conf")])
    return out.getvalue().rstrip("\n") + "\n"


def rewrite(page: Path) -> bool:
    """Replace every sample's output on ``page`` by the command's; whether anything changed."""
    text = page.read_text()
    fresh = SAMPLE.sub(lambda found: f"```text\n$ {found[1]}\n{produce(found[1])}```", text)
    if fresh != text:
        page.write_text(fresh)
    return fresh != text


if __name__ == "__main__":
    for page in PAGES:
        if rewrite(page):
            print(f"rewrote {page.relative_to(ROOT)}")
