"""docs/own-data.md's worked example, run as the page writes it, and the table it shows.

The page's example section holds a ``conf/local`` YAML file (its path on its first comment line), the
``kedro run`` commands and, between two markers, the ``retrieval_table.md`` those commands wrote, the first
marker naming the kind of CPU that wrote it (:func:`cpu_kind`). :func:`run_example` runs it in a fresh copy of the
project on a folder of Omniglot drawings (:func:`tests.own_images.write_omniglot_folder`), one thread, as
``tests/project/test_own_data_example.py`` does; after a change that moves the numbers,
``python -m tests.project.own_data_example`` (from the project's root, a few minutes) writes the page's table anew.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from fdsml.native_bf16 import cpu_has_native_bf16
from tests.fresh_clone import fresh_clone, run
from tests.own_images import write_omniglot_folder
from tests.support import ROOT

PAGE = ROOT / "docs" / "own-data.md"
FOLDER, CLASSES, PER_CLASS = "data/01_raw/drawings", 48, 2
"""The example's folder: 48 Omniglot characters of two drawings each, as the page says."""
MARKER = "<!-- the worked example's retrieval_table.md, written on a CPU of kind: {kind} -->\n"
TABLE = re.compile(re.escape(MARKER).replace(re.escape("{kind}"), "(.+?)") + "(.*?)(<!-- end of the table -->)", re.S)
QUERIES = CLASSES * PER_CLASS // 2
"""The example's scored test queries: the 24 test characters' drawings."""
UNTRAINED_ROWS = ("raw pixels (k-NN)", "scratch, frozen trunk")
"""The rows no training step computes: the same on every kind of CPU."""
PROPORTIONS = ("recall@1", "recall@2", "recall@4", "recall@8", "map@r", "r_precision")
"""The table's columns that are proportions of the queries (in %): their noise is a binomial's."""


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


def shown_kind() -> str:
    """The kind of CPU that wrote the page's table (:func:`cpu_kind` there)."""
    return TABLE.search(section()).group(1)


def cpu_kind() -> str:
    """This CPU's kind as a run sees it: whether it computes bf16 natively (the precision rule then trains the parts an
    objective declares in bf16, and everything in float32 where it does not: :mod:`fdsml.native_bf16`), the instruction
    set oneDNN computes convolutions with (its verbose log's ``isa:``) and ATen's vector width. Together they choose the
    precision and the kernels, and so the order a sum is taken in: a seed's bytes repeat on one thread only on a CPU of
    the same kind (docs/reproducibility.md)."""
    convolution = "import torch; torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4).bfloat16(), torch.ones(1, 1, 3, 3).bfloat16())"
    probe = subprocess.run([sys.executable, "-c", convolution], env={**os.environ, "ONEDNN_VERBOSE": "1"},
                           capture_output=True, text=True, check=True)  # fmt: skip
    isa = re.search(r"onednn_verbose,.*?,info,cpu,isa:(.+)", probe.stdout).group(1).strip()
    precision = "native bf16" if cpu_has_native_bf16() else "no native bf16 (float32)"
    return f"{precision}; oneDNN {isa}; ATen {torch.backends.cpu.get_cpu_capability()}"


def within_noise(table: str, shown: str, queries: int = QUERIES) -> list[str]:
    """How ``table``, written on another kind of CPU, departs from ``shown`` by more than another seed would: its
    text with every number masked differs, an untrained row's numbers differ, or a trained row's retrieval figure
    lies more than 3 standard errors of the difference of two independent runs' proportions on ``queries`` queries
    from the page's (NMI and the verdicts' figures are left to the same kind's exact comparison). Empty: within noise."""
    masked = re.compile(r"[+-]?\d+(?:\.\d+)?(?:e-?\d+)?")
    rows, page_rows = _rows(table), _rows(shown)
    departures = [] if masked.sub("#", "\n".join(rows)) == masked.sub("#", "\n".join(page_rows)) else ["the tables' text differs"]
    header = [name.strip() for name in page_rows[0].strip("|").split("|")]
    for row, page_row in zip(rows[2:], page_rows[2:]):
        cells, page_cells = row.strip("|").split("|"), page_row.strip("|").split("|")
        label = page_cells[0].strip()
        if label in UNTRAINED_ROWS:
            departures += [] if cells == page_cells else [f"{label}: {row} against the page's {page_row}"]
            continue
        for name, cell, page_cell in zip(header, cells, page_cells):
            if name in PROPORTIONS and cell.strip():
                departures += _beyond_noise(f"{label} {name}", float(cell), float(page_cell), queries)
    return departures


def _beyond_noise(name: str, value: float, expected: float, queries: int) -> list[str]:
    """``name``'s departure, when ``value`` (in %) lies more than 3 standard errors of the difference of two independent
    proportions on ``queries`` queries from ``expected``; none otherwise."""
    p = (value + expected) / 200  # both 0 or both 100: a bound of 0, and no departure
    bound = 300 * (2 * p * (1 - p) / queries) ** 0.5
    return [f"{name}: {value} against the page's {expected} (more than {bound:.1f} apart)"] if abs(value - expected) > bound else []


def _rows(table: str) -> list[str]:
    """The first table's lines (its header, rule and rows)."""
    lines = table.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[first:end]


def without_seconds(table: str) -> str:
    """``table`` with the rate searches' seconds (the last cell of their rows: wall time, the one figure a rerun
    does not repeat) left out."""
    return re.sub(r"^(\| \S+ \|(?: [0-9.]* \|)+ [0-9.e-]+ \|) \d+ \|$", r"\1 (seconds) |", table, flags=re.M)


def run_example(folder: Path) -> tuple[Path, list[str]]:
    """The example run in a fresh copy of the project in ``folder`` (one thread: the same bytes on any core count of
    one kind of CPU); the project's path and each command's output. Raises when a command fails."""
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
        put_on_page((project / "data/08_reporting/retrieval_table.md").read_text().rstrip("\n"))


def put_on_page(table: str) -> None:
    """``table`` (the example's, written on this CPU) on the page, under a marker naming this CPU's kind."""
    text = PAGE.read_text()
    PAGE.write_text(TABLE.sub(lambda found: f"{MARKER.format(kind=cpu_kind())}{table}\n{found[3]}", text))


if __name__ == "__main__":
    os.chdir(ROOT)
    write_table()
    sys.exit(0)
