"""DVC reruns a stage exactly when its sources or parameters change (in a scratch copy of the repository)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(args, cwd):
    env = os.environ | {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "KEDRO_DISABLE_TELEMETRY": "1"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    if shutil.which("dvc", path=str(BIN)) is None:
        pytest.skip("dvc is not installed in this environment")
    copy = tmp_path_factory.mktemp("repo")
    tracked = _run(["git", "ls-files"], ROOT).splitlines()
    for name in tracked:
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    for folder in ("01_raw", "02_intermediate", "03_primary", "06_models", "08_reporting"):
        (copy / "data" / folder).mkdir(parents=True, exist_ok=True)
    _run(["git", "init", "-q"], copy)
    small = (copy / "conf/base/parameters_fractals.yml").read_text()
    small = small.replace("n_classes: 10", "n_classes: 3").replace("instances_per_class: 20", "instances_per_class: 4")
    small = small.replace("    size: 512", "    size: 128").replace("    points: 100000", "    points: 8000")
    (copy / "conf/base/parameters_fractals.yml").write_text(small)
    return copy


def test_repro_runs_then_skips_then_reruns_on_a_parameter_change(repository):
    first = _run(["dvc", "repro", "fractals"], repository)
    assert "Running stage 'fractals'" in first
    assert (repository / "data/02_intermediate/fractal_codes.parquet").exists()
    again = _run(["dvc", "repro", "fractals"], repository)
    assert "Running stage" not in again and "didn't change" in again
    assert "up to date" in _run(["dvc", "status", "fractals"], repository)
    params = repository / "conf/base/parameters_fractals.yml"
    params.write_text(params.read_text().replace("seed: 0 ", "seed: 1 "))
    changed = _run(["dvc", "repro", "fractals"], repository)
    assert "Running stage 'fractals'" in changed
