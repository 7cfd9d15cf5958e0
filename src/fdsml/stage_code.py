"""The code each DVC stage runs, as dvc.yaml's ``src/`` dependencies: generated here, kept true by a test.

A stage runs one Kedro pipeline. The code it executes is its pipeline's package, the project's
datasets its catalog files name, and the plug-ins (objective, formula family, dataset readers:
:mod:`fdsml.plugins`) its parameter sections select in ``conf/base`` and in ``conf/paper``, the two
environments its ``kedro_env`` runs it in, with every module of ``fdsml`` they import
(:func:`fdsml.fingerprints.code_modules`, the same closure a run's fingerprint hashes). A stage lists
those files one by one, so a module no stage runs (a plug-in nobody selects) leaves ``dvc status``
clean, and an edit of a file a stage runs makes it stale.

``python -m fdsml.stage_code`` says whether dvc.yaml lists them (exit 1 naming each stage that
differs); ``python -m fdsml.stage_code --write`` rewrites each stage's ``src/`` entries. A plug-in of
another package (an entry point) has no file in the repository: it enters the fingerprints of the
runs that select it (reused results), not dvc.yaml.
"""

from __future__ import annotations

import argparse
import pkgutil
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from fdsml import fingerprints, plugins
from fdsml.atomic import atomic_path
from fdsml.config import env_parameters

ENVIRONMENTS = ("base", "paper")
"""The environments a stage runs in (``kedro_env`` of params.yaml: ``local`` is conf/base and your own overrides)."""
CATALOG = re.compile(r"^conf/base/catalog[\w]*\.yml$")
DEPENDENCY = re.compile(r"^      - (\S+)")


def stage_sections(stage: Mapping[str, Any]) -> set[str]:
    """The parameter sections a stage of dvc.yaml depends on (``params``: ``file: [section, ...]``)."""
    return {key.split(".")[0] for entry in stage.get("params", []) if isinstance(entry, dict) for keys in entry.values() for key in keys}


def catalog_modules(path: Path) -> set[str]:
    """The modules of ``fdsml`` a catalog file names as dataset types (``type: fdsml.catalog_datasets.X``)."""
    named = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and value.startswith(f"{fingerprints.PACKAGE}."):
            parts = value.split(".")
            named.add(next(".".join(parts[:end]) for end in range(len(parts), 0, -1) if fingerprints.is_module(".".join(parts[:end]))))

    walk(yaml.safe_load(path.read_text()))
    return named


def pipeline_modules(name: str) -> set[str]:
    """Pipeline ``name``'s package and every module in it."""
    package = f"{fingerprints.PACKAGE}.pipelines.{name}"
    folder = fingerprints.source_path(package).parent
    return {package, *(f"{package}.{info.name}" for info in pkgutil.iter_modules([str(folder)]))}


def selected_plugins(sections: Iterable[str], conf_source: Path) -> set[str]:
    """The modules of the plug-ins ``sections`` select in each of :data:`ENVIRONMENTS`."""
    from fdsml.pipelines.run_checks import PARSERS

    modules = set()
    for env in ENVIRONMENTS:
        params = env_parameters(str(conf_source), env)
        for section in sections:
            modules.update(plugins.selected_modules(PARSERS[section](params[section])))
    return modules


def stage_files(name: str, stage: Mapping[str, Any], root: Path) -> list[str]:
    """The source files (relative to ``root``) stage ``name`` runs: what its ``src/`` dependencies must be."""
    roots = pipeline_modules(name) | selected_plugins(stage_sections(stage), root / "conf")
    for dependency in stage.get("deps", []):
        if CATALOG.match(dependency):
            roots |= catalog_modules(root / dependency)
    files = {fingerprints.source_path(module).resolve() for module in fingerprints.code_modules(*sorted(roots))}
    source = (root / "src").resolve()
    return sorted(str(path.relative_to(root.resolve())) for path in files if path.is_relative_to(source))


def expected_files(root: Path) -> dict[str, list[str]]:
    """:func:`stage_files` of every stage of ``root``'s dvc.yaml."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    return {name: stage_files(name, stage, root) for name, stage in stages.items()}


def listed_files(text: str) -> dict[str, list[str]]:
    """The ``src/`` dependencies each stage of dvc.yaml's ``text`` lists."""
    stages = yaml.safe_load(text)["stages"]
    return {name: [entry for entry in stage.get("deps", []) if entry.startswith("src/")] for name, stage in stages.items()}


def rewritten(text: str, files: Mapping[str, list[str]]) -> str:
    """dvc.yaml's ``text`` with each stage's ``src/`` dependencies replaced by ``files[stage]``, in the stage's
    ``deps`` list before its other entries; everything else (comments, order, the other entries) as it was."""
    lines, stage, in_deps = [], None, False
    for line in text.splitlines():
        heading = re.match(r"^  (\w+):\s*$", line)
        if heading:
            stage, in_deps = heading.group(1), False
        elif re.match(r"^    \w+:", line):
            in_deps = line.strip() == "deps:"
            if in_deps and stage in files:
                lines.append(line)
                lines += [f"      - {path}" for path in files[stage]]
                continue
        elif in_deps and (match := DEPENDENCY.match(line)) and match.group(1).startswith("src/"):
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def differences(root: Path) -> list[str]:
    """One line per stage whose ``src/`` dependencies in dvc.yaml are not the code it runs."""
    expected, listed = expected_files(root), listed_files((root / "dvc.yaml").read_text())
    found = []
    for stage, files in expected.items():
        missing, extra = sorted(set(files) - set(listed[stage])), sorted(set(listed[stage]) - set(files))
        if missing or extra:
            found.append(f"stage {stage}: runs but does not list {missing or 'nothing more'}; lists but does not run {extra or 'nothing more'}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fdsml.stage_code", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite dvc.yaml's src/ dependencies")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the project folder (default: here)")
    options = parser.parse_args(argv)
    path = options.root / "dvc.yaml"
    if options.write:
        text = rewritten(path.read_text(), expected_files(options.root))
        with atomic_path(path) as temporary:
            temporary.write_text(text)
        return 0
    found = differences(options.root)
    for line in found:
        print(line)
    if found:
        print("Rewrite them: python -m fdsml.stage_code --write (then `make lock`)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
