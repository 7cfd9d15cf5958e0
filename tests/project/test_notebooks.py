"""Every notebook in notebooks/ runs top to bottom on the default pipelines' outputs, so none can rot.

A scratch copy of the project runs the pipelines the notebooks read (on a tiny configuration),
then nbclient executes each notebook there, with the Kedro IPython extension finding the copy.
Notebooks are stored without outputs.
"""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from nbclient import NotebookClient

from tests.support import NO_HOLDOUT, ROOT, copy_tracked, tiny_fractals, tiny_pretrain

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TINY = {
    "fractals": tiny_fractals(points=800, class_filter=(128, 8000), holdout=NO_HOLDOUT),
    "pretrain": tiny_pretrain(),
}
ENV = {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "KEDRO_DISABLE_TELEMETRY": "1", "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1"}


def _run(args, cwd):
    result = subprocess.run(args, cwd=cwd, env=os.environ | ENV, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    copy = copy_tracked(tmp_path_factory.mktemp("notebook_project"))
    (copy / "conf/local/parameters.yml").write_text(yaml.safe_dump(TINY))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    _run(["git", "init", "-q"], copy)
    _run(["git", "add", "-A"], copy)
    _run([*git, "commit", "-qm", "copy"], copy)
    _run(["kedro", "run", "--pipelines=pretrain,export"], copy)
    return copy


def test_there_are_notebooks_and_they_are_stored_without_outputs():
    assert len(NOTEBOOKS) >= 2
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert code[0].source.strip() == "%load_ext kedro.ipython", f"{path.name} must read data through the Kedro catalog"
        assert all(not cell.outputs and cell.execution_count is None for cell in code), f"{path.name} is stored with outputs"


@pytest.mark.parametrize("name", [path.name for path in NOTEBOOKS])
def test_the_notebook_runs_on_the_default_configuration(project, name, monkeypatch):
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    notebook = nbformat.read(project / "notebooks" / name, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(project)}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs), f"{name} drew nothing"
