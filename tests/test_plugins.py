"""A plug-in is one module: dropped into its folder, or in a package of your own named by an entry point, it is found,
selected by name, checked, run, and it enters the fingerprints of the runs that select it and of no other.

The plug-ins are docs/plugins.md's worked examples, as the page writes them (``tests/plugin_examples.py``).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from fdsml import fingerprints, plugins
from fdsml.data import retrieval_datasets
from fdsml.families import known_families, unregister_family
from fdsml.training.pretrain_objectives import known_objectives, recipe
from tests.fresh_clone import fresh_clone, run
from tests.plugin_examples import KINDS, PACKAGE, drop_into, fingerprints_of, name_of, package_folder, worked_examples
from tests.support import ROOT, copy_tracked

FOLDERS = {kind: f"fdsml.{folder.replace('/', '.')}" for kind, folder in KINDS.items()}
GROUPS = {"objective": "fdsml.objectives", "family": "fdsml.families", "dataset": "fdsml.datasets"}
KNOWN = {"objective": known_objectives, "family": known_families, "dataset": retrieval_datasets.available_datasets}
USED = {  # the module of each kind conf/base selects, and the fingerprints an edit of it changes
    "objective": ("src/fdsml/training/pretrain_objectives/pa_triplet.py", {"pretrain"}),
    "family": ("src/fdsml/families/finefractaldb.py", {"fractals", "pretrain"}),
    "dataset": ("src/fdsml/data/readers/omniglot.py", {"retrieval"}),
}


@pytest.fixture
def folder_of_plugins(tmp_path, monkeypatch):
    """``drop(kind, source, name)``: a module in a second folder of the plug-ins' package (as if dropped into it), found
    by its registry; the registries, the package's folders and the imported modules are as they were after the test."""
    for known in KNOWN.values():
        known()
    monkeypatch.setattr(recipe, "_RECIPES", dict(recipe._RECIPES))
    monkeypatch.setattr(retrieval_datasets, "_LAYOUTS", dict(retrieval_datasets._LAYOUTS))
    added = []

    def drop(kind: str, source: str, name: str) -> None:
        package = importlib.import_module(FOLDERS[kind])
        folder = tmp_path / kind
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.py").write_text(source)
        monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
        added.append(f"{FOLDERS[kind]}.{name}")
        plugins.rediscover(FOLDERS[kind], GROUPS[kind])

    yield drop
    for module in added:
        sys.modules.pop(module, None)
    unregister_family(name_of("family"))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_module_dropped_into_its_folder_is_found_and_enters_no_run_that_does_not_select_it(kind, folder_of_plugins):
    source = worked_examples()[kind][1]
    name = name_of(kind)
    before = fingerprints.code_digest("fdsml.training.pretrain", "fdsml.families.finefractaldb", "fdsml.data.readers.omniglot")
    assert name not in KNOWN[kind]()
    folder_of_plugins(kind, source, name)
    assert name in KNOWN[kind]()
    fingerprints.code_digest.cache_clear()
    assert fingerprints.code_digest("fdsml.training.pretrain", "fdsml.families.finefractaldb", "fdsml.data.readers.omniglot") == before
    assert f"{FOLDERS[kind]}.{name}" in fingerprints.code_modules(f"{FOLDERS[kind]}.{name}")


def test_a_plugin_that_fails_to_import_stops_the_run_naming_it(folder_of_plugins):
    with pytest.raises(plugins.PluginError, match=r"^plug-in fdsml\.families\.broken failed to import: ModuleNotFoundError: No module named 'no_such_package'; fix or remove its module$"):
        folder_of_plugins("family", "import no_such_package\n", "broken")


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """A copy of the project's code and configuration, and its fingerprints as they are."""
    root = copy_tracked(tmp_path_factory.mktemp("project"), "src", "conf")
    return root, fingerprints_of(root)[0]


@pytest.mark.slow  # two processes importing the whole training stack: about a minute on 2 busy cores
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_unselected_plugin_changes_no_fingerprint_and_an_edit_of_a_used_one_changes_its_runs(kind, baseline, tmp_path):
    """conf/base's table, pre-training, retrieval and classification runs keep their fingerprints (configuration and code)
    when a plug-in of ``kind`` none of them selects is added; an edit of the one they select redoes exactly its runs."""
    root, before = baseline
    copy = copy_tracked(tmp_path, "src", "conf")
    drop_into(copy, kind)
    used, redone = USED[kind]
    added, edited = fingerprints_of(copy, copy / used)
    assert added == before
    assert {step for step in before if edited[step] != added[step]} == redone


PROBE = r"""
import json, sys
from fdsml.data import available_datasets, reader_module
from fdsml.families import known_families
from fdsml.pipelines.run_checks import check_run, RunCheckError
from fdsml.training import pretrain
from fdsml.training.pretrain_objectives import known_objectives
from fdsml import fingerprints
from fdsml.families import family_spec

fractals = {"family": "damped_curves", "damped_curves": {"n_classes": 3}}
config = pretrain.parse_pretrain_params({"objective": "psi_ntxent", "psi_ntxent": {"temperature": 0.2}})
run = pretrain.defining_run(config, family_spec(fractals), "codes")
found = {
    "names": [name in known for name, known in (("psi_ntxent", known_objectives()), ("damped_curves", known_families()), ("sample_crops", available_datasets()))],
    "reader": reader_module("sample_crops"),
    "code": sorted(m for m in fingerprints.code_modules(*run.code) if m.split(".")[0] != "fdsml"),
    "sections": sorted(set(fingerprints.defining_configuration(config)) & set(known_objectives())),
    "settings": config.objective_settings.temperature,
}
check_run({"fractals": fractals, "pretrain": {"objective": "psi_ntxent"}, "retrieval": {"data": {"dataset": "sample_crops"}}}, reads={"fractals", "pretrain"})
try:
    check_run({"fractals": {"family": "damped_curves", "damped_curves": {"pointz": 5}}})
except RunCheckError as error:
    found["misspelt"] = str(error)
json.dump(found, sys.stdout)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """docs/plugins.md's package of the three worked plug-ins, installed by pip into a folder of its own (a PYTHONPATH entry)."""
    folder = tmp_path_factory.mktemp("plugins")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(folder / "site"), str(package_folder(folder / "package"))]
    subprocess.run(command, check=True, capture_output=True)
    return folder / "site"


@pytest.mark.slow  # pip installs a package of its own: about 12 seconds (`make test` stays under 15 minutes; CI runs it)
def test_a_package_of_your_own_registers_each_kind_through_its_entry_points_and_its_code_enters_its_runs(installed):
    env = os.environ | {"PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{installed}", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert found["names"] == [True, True, True]
    assert found["reader"] == f"{PACKAGE}.sample_crops"
    assert found["code"] == [PACKAGE, f"{PACKAGE}.damped_curves", f"{PACKAGE}.psi_ntxent"]
    assert found["sections"] == ["psi_ntxent"] and found["settings"] == 0.2
    assert found["misspelt"].startswith("fractals.damped_curves: unknown key(s) pointz")


@pytest.mark.slow  # a fresh copy, pip, and three kedro processes: about two minutes on 2 busy cores
def test_a_package_of_your_own_is_selected_checked_and_run_by_kedro(installed, tmp_path):
    """`kedro check` and `kedro run` with the package's objective, family and dataset selected on the command line."""
    project = fresh_clone(tmp_path / "project")
    prefix = f"PYTHONPATH={installed} "
    selected = "fractals.family=damped_curves,pretrain.objective=psi_ntxent"
    code, output = run(f"{prefix}kedro check --pipelines=pretrain --params={selected},fractals.damped_curves.pointz=5", project)
    assert code == 1 and "fractals.damped_curves: unknown key(s) pointz" in output, output[-3000:]
    tiny = "pretrain.train.max_steps=2,pretrain.data.classes_per_batch=2,pretrain.data.instances_per_class=2"
    code, output = run(f"{prefix}kedro run --pipelines=pretrain --params={selected},{tiny}", project)
    assert code == 0, output[-3000:]
    summary = json.loads((project / "data/08_reporting/fractal_summary.json").read_text())
    assert summary["family"] == "damped_curves"
    history = (project / "data/08_reporting/pretrain_history.csv").read_text().splitlines()
    assert history[-1].startswith("2,")
    code, output = run(f"{prefix}kedro run --pipelines=retrieval --params=retrieval.data.dataset=sample_crops,retrieval.train.max_steps=2,retrieval.train.freeze_backbone_steps=1", project)
    assert code == 0, output[-3000:]
    metrics = json.loads((project / "data/08_reporting/retrieval_metrics.json").read_text())
    assert {start["dataset"] for start in metrics.values()} == {"sample_crops"}
    assert all(0 <= value <= 1 for start in metrics.values() for value in start["mean"].values())


def test_a_plugin_taking_a_registered_name_stops_the_run_naming_both(folder_of_plugins):
    source = "from fdsml.families import register_family\nfrom fdsml.families.rcdb import RCDBFamily\n\nregister_family(RCDBFamily())\n"
    with pytest.raises(plugins.PluginError, match=r"^plug-in fdsml\.families\.second_rcdb failed to import: ValueError: a formula family named 'rcdb' is already registered"):
        folder_of_plugins("family", source, "second_rcdb")
