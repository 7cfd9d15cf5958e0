"""The pre-training budget study's arms: keyed by their definition and code, run once through fdsml.tuning.arms."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def budget(monkeypatch):
    return load_benchmark("pretraining_budget", monkeypatch)


def test_an_arms_fingerprint_changes_with_its_definition_and_code_only(budget, monkeypatch):
    arms = [("scratch", 0), ("each", 30), ("each", 300)]
    base = budget.arm_fingerprints(budget.Study(), arms)
    assert list(base) == ["each:300", "each:30", "scratch:0"]  # longest first
    assert budget.arm_fingerprints(budget.Study(), arms[:2]) == {name: base[name] for name in ("each:30", "scratch:0")}
    bigger = budget.arm_fingerprints(budget.Study(size=64), arms)
    assert all(bigger[name] != base[name] for name in base)
    monkeypatch.setattr(budget, "code_version", lambda: "other code")
    assert all(fingerprint != base[name] for name, fingerprint in budget.arm_fingerprints(budget.Study(), arms).items())


@pytest.mark.slow
def test_a_second_invocation_runs_no_arm_and_draws_the_same_table(tmp_path):
    def invoke(report: str) -> str:
        command = [
            sys.executable, "benchmarks/pretraining_budget.py", "--arms", "scratch:0", "each:2", "--finetune-steps", "2",
            "--finetune-freeze-steps", "1", "--seeds", "0", "--jobs", "1", "--storage", str(tmp_path / "arms.log"),
            "--out", str(tmp_path / "out"), "--report-dir", str(tmp_path / report),
        ]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT / "src")})
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stderr

    first = invoke("first")
    assert "scratch 0: frozen R@1" in first and "each 2: frozen R@1" in first
    second = invoke("second")
    assert "frozen R@1 0" not in second
    table = (tmp_path / "first" / "pretraining_budget.md").read_text()
    assert "| scratch | 0 |" in table and "| each | 2 |" in table
    assert (tmp_path / "second" / "pretraining_budget.md").read_text() == table
    assert not (tmp_path / "out" / "runs").exists() or not any((tmp_path / "out" / "runs").iterdir())
