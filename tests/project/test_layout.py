"""tests/ mirrors src/fdsml, so that the tests of a module are found where the module is.

A test of a module of a package lives in the package's folder (``tests/training/`` for ``fdsml.training``); a test of a
top-level module is ``tests/test_<module>.py`` (or ``tests/test_<module>_<topic>.py``). Tests of no module have folders
named for what they test instead: the repository as a whole (docs, DVC, configuration, imports) in ``tests/project/``,
the scripts of ``benchmarks/`` in ``tests/benchmarks/``, the faults a run survives in ``tests/faults/``. A test file
that docs, configuration or code names is where they say. What two test files share lives in ``tests/support.py``
(fixtures in ``tests/conftest.py``): no file imports from a ``test_*`` module, so a test file can move or go alone.
"""

import ast
import re
from pathlib import Path

from tests.project.pages import text_files
from tests.support import PACKAGE, ROOT

NOT_MIRRORS = ("project", "benchmarks", "faults")
TEST_FILE = re.compile(r"\btests/[\w/]*\.py\b")


def misplaced(tests: Path, package: Path) -> list[str]:
    """Every ``test_*.py`` under ``tests`` that mirrors no module or package of ``package`` and is in no folder of
    :data:`NOT_MIRRORS`, with where such a test goes."""
    modules = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests)
        if folder.parts and folder.parts[0] in NOT_MIRRORS:
            continue
        name = path.stem.removeprefix("test_")
        if not folder.parts and not any(name == module or name.startswith(f"{module}_") for module in modules):
            found.append(f"{path.relative_to(tests)}: no module fdsml.{name}; move it to its module's package folder or to one of {', '.join(f'tests/{name}/' for name in NOT_MIRRORS)}")
        elif folder.parts and not (package / folder / "__init__.py").is_file():
            found.append(f"{path.relative_to(tests)}: no package fdsml.{'.'.join(folder.parts)}; a test folder mirrors a package of src/fdsml")
    return found


def test_every_test_file_mirrors_src_or_is_in_a_named_folder():
    found = misplaced(ROOT / "tests", PACKAGE)
    assert not found, "tests that do not mirror src/fdsml:\n" + "\n".join(found)


def test_the_check_finds_a_stray_test(tmp_path):
    package, tests = tmp_path / "src" / "pkg", tmp_path / "tests"
    for path in (package / "__init__.py", package / "config.py", package / "training" / "__init__.py", package / "training" / "loop.py"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    kept = ["test_config.py", "test_config_files.py", "training/test_loop.py", "training/test_anything.py", "project/test_docs.py",
            "benchmarks/test_speed.py", "faults/test_kills.py"]
    stray = ["test_docs.py", "test_loop.py", "training/deep/test_loop.py", "trainer/test_loop.py"]
    for name in kept + stray:
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text("")
    assert [line.split(":")[0] for line in misplaced(tests, package)] == sorted(stray)


def test_every_test_file_a_text_names_exists():
    missing = [f"{path}: {named}" for path, text in text_files() for named in TEST_FILE.findall(text) if not (ROOT / named).is_file()]
    assert not missing, "names of test files that do not exist (moved?):\n" + "\n".join(missing)


def imports_of_test_modules(tests: Path) -> list[str]:
    """Every import, in a ``.py`` file under ``tests``, of a ``test_*`` module (absolute, relative, or ``from . import``)."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""] + ([alias.name for alias in node.names] if node.module is None else [])
            else:
                continue
            for module in (module for module in modules if any(part.startswith("test_") for part in module.split("."))):
                found.append(f"{path.relative_to(tests)}:{node.lineno}: imports {module}; move what it shares to tests/support.py")
    return found


def test_no_file_imports_from_a_test_module():
    found = imports_of_test_modules(ROOT / "tests")
    assert not found, "imports of test modules:\n" + "\n".join(found)


def test_the_import_check_finds_each_way_of_importing_a_test_module(tmp_path):
    files = {
        "support.py": "import os\nfrom tests.support import ROOT\n",
        "test_ok.py": "from .support import ROOT\nfrom tests import support\nCODE = 'from test_x import y'  # a string, not an import\n",
        "test_a.py": "from .test_b import B\n",
        "pkg/test_c.py": "from tests.test_a import A\n",
        "pkg/worker.py": "def run():\n    from . import test_c\n",
        "pkg/test_d.py": "import tests.pkg.test_c\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert [line.split(": ")[0] for line in imports_of_test_modules(tmp_path)] == [
        "pkg/test_c.py:1", "pkg/test_d.py:1", "pkg/worker.py:2", "test_a.py:1",
    ]


BENCHMARK_LINES = 2_000
"""The most lines benchmarks/ may hold in all (HELPERS.md's standards): merge scripts that repeat each other."""


def test_benchmarks_hold_at_most_two_thousand_lines():
    lines = {path.name: len(path.read_text().splitlines()) for path in (ROOT / "benchmarks").glob("*.py")}
    assert sum(lines.values()) <= BENCHMARK_LINES, sorted(lines.items(), key=lambda item: -item[1])
