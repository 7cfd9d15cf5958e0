"""docs/plugins.md's worked plug-ins (an objective, a formula family, a dataset reader) as the page writes them, and
what the tests do with them: drop them into a copy of the project, build a package of them, print a copy's fingerprints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

PAGE = ROOT / "docs" / "plugins.md"
KINDS = {"objective": "training/pretrain_objectives", "family": "families", "dataset": "data/readers"}
PACKAGE = "my_fdsml_plugins"
"""The package of docs/plugins.md's entry points."""


def worked_examples() -> dict[str, tuple[str, str]]:
    """``kind -> (path in the repository, source)`` of each worked plug-in (a Python block whose first line names its file)."""
    found = {}
    for path, source in re.findall(r"```python\n# (src/fdsml/\S+\.py)\n(.*?)```", PAGE.read_text(), re.S):
        kind = next(kind for kind, folder in KINDS.items() if path.startswith(f"src/fdsml/{folder}/"))
        found[kind] = (path, source)
    assert set(found) == set(KINDS), f"docs/plugins.md: a worked example of each kind, found {sorted(found)}"
    return found


def name_of(kind: str) -> str:
    """The name the worked plug-in of ``kind`` registers (its module's name)."""
    return Path(worked_examples()[kind][0]).stem


def drop_into(root: Path, *kinds: str) -> list[Path]:
    """Write the worked plug-ins of ``kinds`` into the project copy ``root``, each into its folder; their paths."""
    written = []
    for kind in kinds:
        path, source = worked_examples()[kind]
        (root / path).write_text(source)
        written.append(root / path)
    return written


def package_folder(folder: Path) -> Path:
    """A package of the three worked plug-ins with docs/plugins.md's pyproject.toml (entry points and all), in ``folder``."""
    toml = re.search(r"```toml\n# pyproject.toml[^\n]*\n(.*?)```", PAGE.read_text(), re.S).group(1)
    (folder / PACKAGE).mkdir(parents=True)
    (folder / "pyproject.toml").write_text(toml)
    (folder / PACKAGE / "__init__.py").write_text('"""Plug-ins of fdsml, registered through entry points."""\n')
    for path, source in worked_examples().values():
        (folder / PACKAGE / Path(path).name).write_text(source)
    return folder


FINGERPRINTS = r"""
import json, sys
from pathlib import Path
import yaml
conf = {}
for path in sorted(Path("conf/base").glob("parameters_*.yml")):
    conf.update(yaml.safe_load(path.read_text()) or {})
from fdsml import fingerprints
from fdsml.families import family_spec
from fdsml.data.classification_datasets import classification_reader_module
from fdsml.training import classification, finetune, pretrain, retrieval

def run_fingerprint(run):
    return fingerprints.fingerprint(run.configuration, code=run.code, inputs=run.inputs)

def found():
    fingerprints.code_digest.cache_clear()
    spec = family_spec(conf["fractals"])
    config = pretrain.parse_pretrain_params(conf["pretrain"])
    found = {"fractals": spec.family.fingerprint(spec.settings), "pretrain": run_fingerprint(pretrain.defining_run(config, spec, "codes"))}
    config = retrieval.parse_retrieval_params(conf["retrieval"])
    task, run = retrieval.fine_tuning(config, 2), retrieval.finetune_run(config.data.dataset, config.starts[0], 0)
    found["retrieval"] = run_fingerprint(finetune.defining_run(task, run, "weights", "images"))
    config = classification.parse_classification_params(conf["classification"])
    name = config.datasets[0].name
    reader = (classification_reader_module(name),)
    task, run = classification.fine_tuning(config, name, 2, reader), classification.finetune_run(config, name, config.starting_points[0])
    found["classification"] = run_fingerprint(finetune.defining_run(task, run, "weights", "images"))
    return found

states = [found()]
for edited in sys.argv[1:]:
    with open(edited, "a") as source:
        source.write("\nEDITED = True\n")
    states.append(found())
json.dump(states, sys.stdout)
"""
"""Prints the fingerprints of conf/base's table, pre-training and fine-tuning runs (inputs stand-ins) in the project it
runs in; then again after each file its arguments name gets a statement appended (a list, one mapping per state)."""


def fingerprints_of(root: Path, *edited: Path, pythonpath: str | None = None) -> list[dict[str, str]]:
    """:data:`FINGERPRINTS` run in the project copy ``root`` on its own ``src`` (and ``pythonpath`` after it), editing ``edited``."""
    path = os.pathsep.join(filter(None, (str(root / "src"), pythonpath)))
    env = os.environ | {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", FINGERPRINTS, *map(str, edited)]
    result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)
