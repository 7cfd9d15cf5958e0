"""docs/own-data.md's worked example, run as the page writes it, and the table it shows.

The page's example section holds a ``conf/local`` YAML file (its path on its first comment line), the
``kedro run`` commands and, between two markers, the ``retrieval_table.md`` those commands wrote.
:func:`run_example` runs it in a fresh copy of the project on a folder of Omniglot drawings
(:func:`tests.own_images.write_omniglot_folder`), one thread, as ``tests/project/test_own_data_example.py``
does; after a change that moves the numbers, ``python -m tests.project.own_data_example`` (from the
project's root, a few minutes) writes the page's table anew.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from tests.fresh_clone import fresh_clone, run
from tests.own_images import write_omniglot_folder
from tests.support import ROOT

PAGE = ROOT / "docs" / "own-data.md"
FOLDER, CLASSES, PER_CLASS = "data/01_raw/drawings", 48, 2
"""The example's folder: 48 Omniglot characters of two drawings each, as the page says."""
TABLE = re.compile(r"(<!-- the worked example's retrieval_table.md -->\n)(.*?)(<!-- end of the table -->)", re.S)


def section() -> str:
    return PAGE.read_text().split("## A worked example", 1)[1].split("\n## ", 1)[0]


def example() -> tuple[str, str, list[str]]:
    """The example's YAML file (its path from the first comment line), its text, and its kedro commands."""
    text = section()
    yaml_text = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    path = re.match(r"# (conf/local/\S+\.yml)\n", yaml_text).group(1)
    commands = [line.split("#")[0].strip() for line in re.search(r"```bash\n(.*?)```", text, re.S).group(1).splitlines()]
    return path, yaml_text, commands


def shown_table() -> str:
    """The table the page shows."""
    return TABLE.search(section()).group(2).rstrip("\n")


def without_seconds(table: str) -> str:
    """``table`` with the rate searches' seconds (the last cell of their rows: wall time, the one figure a rerun
    does not repeat) left out."""
    return re.sub(r"^(\| \S+ \|(?: [0-9.]* \|)+ [0-9.e-]+ \|) \d+ \|$", r"\1 (seconds) |", table, flags=re.M)


def run_example(folder: Path) -> tuple[Path, list[str]]:
    """The example run in a fresh copy of the project in ``folder`` (one thread: the same bytes on any machine's core
    count); the project's path and each command's output. Raises when a command fails."""
    project = fresh_clone(folder)
    path, yaml_text, commands = example()
    write_omniglot_folder(project / FOLDER, CLASSES, PER_CLASS)
    (project / path).write_text(yaml_text)
    outputs = []
    for command in commands:
        code, output = run(f"OMP_NUM_THREADS=1 {command}", project, timeout=1800)
        if code != 0:
            raise RuntimeError(f"{command} failed:\n{output[-3000:]}")
        outputs.append(output)
    return project, outputs


def write_table() -> None:
    """Run the example and put the table it wrote on the page."""
    with tempfile.TemporaryDirectory() as scratch:
        project, _ = run_example(Path(scratch) / "project")
        table = (project / "data/08_reporting/retrieval_table.md").read_text().rstrip("\n")
    text = PAGE.read_text()
    PAGE.write_text(TABLE.sub(lambda found: f"{found[1]}{table}\n{found[3]}", text))


if __name__ == "__main__":
    os.chdir(ROOT)
    write_table()
    sys.exit(0)
