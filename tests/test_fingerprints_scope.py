"""What enters a fingerprint and what does not: code as a syntax tree (no comments or docstrings),
modules imported lazily, a family's own code, the runtime, and a dataset's listing instead of its folder."""

import re
import shutil

import numpy as np
import pytest
import torch

from fdsml import fingerprints
from fdsml.data import ImageRecords
from fdsml.families import FamilySpec
from fdsml.training import pretrain
from tests.families.discs import DISCS, DiscSettings
from tests.support import pretrain_fingerprint

CONFIG = pretrain.PretrainConfig()


@pytest.fixture
def edit_module(monkeypatch, tmp_path):
    """``edit(module, change)``: the digest reads ``change(source)`` as ``module``'s source, for this test only."""
    original, edited = fingerprints.source_path, {}
    monkeypatch.setattr(fingerprints, "source_path", lambda name: edited.get(name) or original(name))

    def edit(module, change):
        edited[module] = tmp_path / f"{module}.py"
        edited[module].write_text(change(original(module).read_text()))
        fingerprints.code_digest.cache_clear()

    yield edit
    monkeypatch.undo()
    fingerprints.code_digest.cache_clear()


def test_comments_docstrings_and_layout_keep_pretrainings_code_digest(edit_module):
    module = "fdsml.evaluation.corruptions"  # one of the modules pre-training's code imports
    before = fingerprints.code_digest("fdsml.training.pretrain")

    def reworded(source):
        source = re.sub(r'^"""(.*?)"""', '"""A reworded module docstring."""', source, count=1, flags=re.S)
        return "# a new comment\n\n" + source.replace("\n\n\n", "\n\n\n# between definitions\n\n") + "\n# the end\n"

    edit_module(module, reworded)
    assert fingerprints.code_digest("fdsml.training.pretrain") == before
    edit_module(module, lambda source: source + "\nCHANGED = 1\n")
    assert fingerprints.code_digest("fdsml.training.pretrain") != before


def test_the_first_statement_after_a_docstring_counts_and_a_syntax_error_names_its_file(edit_module):
    module = "fdsml.evaluation.corruptions"
    edit_module(module, lambda source: source + '\ndef added():\n    """Its docstring."""\n    return 1\n')
    before = fingerprints.code_digest("fdsml.training.pretrain")
    edit_module(module, lambda source: source + '\ndef added():\n    """Its docstring."""\n    return 2\n')
    assert fingerprints.code_digest("fdsml.training.pretrain") != before
    edit_module(module, lambda source: source + "\ndef broken(:\n")
    with pytest.raises(SyntaxError) as error:
        fingerprints.code_digest("fdsml.training.pretrain")
    assert error.value.filename.endswith(f"{module}.py")
    with pytest.raises(ModuleNotFoundError, match="no source for module 'fdsml.no_such_module'"):
        fingerprints.source_path("fdsml.no_such_module")


def test_an_outside_packages_code_is_its_module_parent_packages_and_what_they_import_relatively_or_not(tmp_path, monkeypatch):
    """A plug-in package outside fdsml (docs/plugins.md): the module, its parent packages (their code runs when it is
    imported), the modules of its package it imports absolutely or relatively, and the fdsml modules it imports (fdsml's
    own package with them); not a module of its package that nothing imports."""
    sources = {
        "__init__.py": "",
        "families/__init__.py": "",
        "families/discs.py": "from fdsml.families import Family\nfrom .shapes import disc\nfrom .. import settings\n",
        "families/shapes.py": "def disc():\n    return 1\n",
        "families/lone.py": "RADIUS = 1\n",
        "settings.py": "import my_fdsml_discs.constants\n",
        "constants.py": "RADIUS = 2\n",
        "unused.py": "",
    }
    for name, source in sources.items():
        (tmp_path / "my_fdsml_discs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "my_fdsml_discs" / name).write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    closure = fingerprints.code_modules("my_fdsml_discs.families.discs")
    assert {name for name in closure if not name.startswith("fdsml")} == {
        f"my_fdsml_discs{name}" for name in ("", ".families", ".families.discs", ".families.shapes", ".settings", ".constants")
    }
    assert {"fdsml", "fdsml.families"} <= closure
    assert fingerprints.code_modules("my_fdsml_discs.families.lone") == {"my_fdsml_discs", "my_fdsml_discs.families", "my_fdsml_discs.families.lone"}


def test_a_lazily_imported_module_enters_the_digest_of_the_package_that_loads_it(edit_module):
    """``fdsml.data`` loads ``image_records`` through its ``__getattr__`` hook, by a name in a string."""
    before = fingerprints.code_digest("fdsml.data")
    edit_module("fdsml.data.image_records", lambda source: source + "\nCHANGED = 1\n")
    assert fingerprints.code_digest("fdsml.data") != before


def test_a_family_registered_from_outside_fdsml_brings_its_code(edit_module, fingerprint_table):
    spec = FamilySpec(DISCS, DiscSettings())
    before = pretrain_fingerprint(CONFIG, fingerprint_table, spec=spec)
    edit_module(type(DISCS).__module__, lambda source: source + "\nCHANGED = 1\n")
    assert pretrain_fingerprint(CONFIG, fingerprint_table, spec=spec) != before


def test_the_selected_objectives_module_enters_pretrainings_code_digest_and_no_other_objectives(edit_module, fingerprint_table):
    """Registered is not enough to enter a run's code: nothing imports an objective by name, and a run adds the one it
    selects (with its imports), so editing another objective keeps the run."""
    from fdsml.training.pretrain_objectives import known_objectives, objective_recipe

    selected = type(CONFIG.recipe).__module__
    imported = fingerprints.code_modules(selected)
    before = pretrain_fingerprint(CONFIG, fingerprint_table)
    others = sorted({type(objective_recipe(name)).__module__ for name in known_objectives()} - imported)
    assert others, "every objective is imported by the selected one"
    for module in others:
        edit_module(module, lambda source: source + "\nCHANGED = 1\n")
        assert pretrain_fingerprint(CONFIG, fingerprint_table) == before, module
    edit_module(selected, lambda source: source + "\nCHANGED = 1\n")
    assert pretrain_fingerprint(CONFIG, fingerprint_table) != before


def test_library_versions_and_the_resolved_device_and_precision_enter_a_runs_fingerprint(fingerprint_table, monkeypatch):
    base = pretrain_fingerprint(CONFIG, fingerprint_table)
    assert pretrain_fingerprint(CONFIG, fingerprint_table, device="cuda") != base  # device: auto on a GPU machine: bf16 there
    versions = fingerprints.library_versions()
    assert set(versions) == {"torch", "timm", "numba", "pytorch-metric-learning"}
    monkeypatch.setattr(fingerprints, "library_versions", lambda: versions | {"timm": "0.0.1"})
    assert pretrain_fingerprint(CONFIG, fingerprint_table) != base


def _files(folder, sizes):
    folder.mkdir(parents=True)
    for name, size in sizes.items():
        (folder / name).write_bytes(b"x" * size)
    return ImageRecords(labels=np.arange(len(sizes)), paths=[folder / name for name in sizes])


def test_a_split_enters_by_its_listing_never_by_its_folder(tmp_path):
    """Names, sizes and labels, not the path: the same data elsewhere keeps it, a rewritten image changes it."""
    sizes = {"a.jpg": 10, "b.jpg": 20, "c.jpg": 30}
    here = _files(tmp_path / "here" / "images", sizes)
    digest = here.listing_digest()
    shutil.copytree(tmp_path / "here", tmp_path / "elsewhere")
    moved = ImageRecords(labels=here.labels, paths=[tmp_path / "elsewhere" / "images" / name for name in sizes])
    assert moved.listing_digest() == digest
    assert ImageRecords(labels=here.labels[::-1].copy(), paths=here.paths).listing_digest() != digest
    (tmp_path / "here" / "images" / "b.jpg").write_bytes(b"y" * 21)
    assert here.listing_digest() != digest
    images = np.zeros((2, 4, 4), dtype=np.uint8)
    in_memory = ImageRecords(labels=np.arange(2), images=images).listing_digest()
    images[0, 0, 0] = 1
    assert ImageRecords(labels=np.arange(2), images=images).listing_digest() != in_memory


def test_a_study_units_code_leaves_out_the_study_machinery_its_result_does_not_depend_on(edit_module):
    """A unit is keyed by :mod:`fdsml.tuning.study_steps`' closure: editing the study storage, its pruning, its runner
    or the tune pipeline's objective keeps every finished unit, editing what a step runs re-keys it."""
    before = fingerprints.code_digest("fdsml.tuning.study_steps")
    for module in ("fdsml.tuning.storage", "fdsml.tuning.pruning", "fdsml.tuning.study", "fdsml.tuning.objective", "fdsml.tuning.arms", "fdsml.tuning.study_runner"):
        edit_module(module, lambda source: source + "\nCHANGED = 1\n")
        assert fingerprints.code_digest("fdsml.tuning.study_steps") == before, module
    edit_module("fdsml.evaluation.pretrain_validation", lambda source: source + "\nCHANGED = 1\n")
    assert fingerprints.code_digest("fdsml.tuning.study_steps") != before
