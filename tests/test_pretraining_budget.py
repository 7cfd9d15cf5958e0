"""The pre-training budget study's arms: keyed by their definition and code, run once through fdsml.tuning.arms."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def budget(monkeypatch):
    return load_benchmark("pretraining_budget", monkeypatch)


def test_an_arms_fingerprint_changes_with_its_definition_and_code_only(budget, monkeypatch):
    arms = [budget.Arm("scratch", 0), budget.Arm("each", 30), budget.Arm("each", 300), budget.Arm("each", 300, 1)]
    base = budget.arm_fingerprints(budget.Study(), arms)
    assert list(base)[:2] == ["each:300:0", "each:300:1"] and list(base)[-1] == "scratch:0:0"  # longest first
    assert base["each:300:0"] != base["each:300:1"]  # the pre-training seed is part of the definition
    assert budget.arm_fingerprints(budget.Study(), arms[:2]) == {name: base[name] for name in ("each:30:0", "scratch:0:0")}
    bigger = budget.arm_fingerprints(budget.Study(size=64), arms)
    assert all(bigger[name] != base[name] for name in base)
    monkeypatch.setattr(budget, "code_version", lambda: "other code")
    assert all(fingerprint != base[name] for name, fingerprint in budget.arm_fingerprints(budget.Study(), arms).items())


def test_a_recipe_changes_its_own_methods_arms_and_reaches_their_pretraining(budget):
    arms = [budget.Arm("each", 30), budget.Arm("fdsl", 30, 2)]
    recipes = {"fdsl": {"optimizer": {"base_lr": 2.0}, "fdsl": {"label_smoothing": 0.1}}}
    before = budget.arm_fingerprints(budget.Study(), arms)
    after = budget.arm_fingerprints(budget.Study(recipes=recipes), arms)
    assert after["each:30:0"] == before["each:30:0"] and after["fdsl:30:2"] != before["fdsl:30:2"]
    overrides = budget.Study(recipes=recipes).pretrain_overrides("fdsl", 30, 2)
    assert overrides["objective"] == "fdsl" and overrides["optimizer"] == {"base_lr": 2.0}
    assert overrides["fdsl"] == {"label_smoothing": 0.1} and overrides["train"] == {"max_steps": 30, "seed": 2}


def test_arms_take_every_pretraining_seed_unless_they_name_one(budget):
    arms = budget.parse_arms(["fdsl:300", "same:300:5"], [], [], [], [0, 1, 2])
    assert [arm.name for arm in arms] == ["fdsl:300:0", "fdsl:300:1", "fdsl:300:2", "same:300:5"]
    assert {arm.name for arm in budget.parse_arms(None, [30], ["each"], [30], [0, 1])} == {"scratch:0:0", "scratch:0:1", "each:30:0", "each:30:1"}


def test_the_spread_is_over_pretraining_seeds_and_each_seeds_value_is_its_fine_tuning_mean(budget):
    def result(seed, frozen, tuned):
        mean = sum(tuned) / len(tuned)
        return {
            "definition": {"method": "fdsl", "budget": 300, "seed": seed},
            "frozen": {"recall@1": frozen, "map@r": frozen / 2},
            "finetuned": {"seeds": {str(i): {"recall@1": v} for i, v in enumerate(tuned)}, "mean": {"recall@1": mean, "map@r": mean / 2}},
            "pretrain_seconds": 60.0 * (seed + 1),
            "commit": "abc",
        }

    row = budget.summarise_group([result(0, 0.2, [0.5, 0.7]), result(1, 0.4, [0.3, 0.3])])
    assert row["pretrain_seeds"] == [0, 1] and row["finetune_seeds"] == 2
    assert row["frozen_recall@1"] == pytest.approx(0.3) and row["frozen_recall@1_std"] == pytest.approx(0.1 * 2**0.5)
    assert row["recall@1"] == pytest.approx(0.45) and row["recall@1_std"] == pytest.approx(0.15 * 2**0.5)  # seeds' means 0.6, 0.3
    assert row["recall@1_pairs_std"] == pytest.approx(pd.Series([0.5, 0.7, 0.3, 0.3]).std())
    assert row["pretrain_minutes"] == pytest.approx(1.5)
    table, _ = budget.summarise([result(0, 0.2, [0.5, 0.7]), result(1, 0.4, [0.3, 0.3])])
    assert "| fdsl | 300 | 0 1 | 30.0 ± 14.1 |" in table


def test_a_recipes_file_must_map_methods_to_overlays(budget, tmp_path):
    path = tmp_path / "recipes.yml"
    path.write_text("fdsl: {optimizer: {base_lr: 1.0}}\n")
    assert budget.read_recipes(str(path)) == {"fdsl": {"optimizer": {"base_lr": 1.0}}}
    path.write_text("fdls: {optimizer: {base_lr: 1.0}}\n")
    with pytest.raises(SystemExit, match="unknown: fdls"):
        budget.read_recipes(str(path))
    path.write_text("fdsl: 1.0\n")
    with pytest.raises(SystemExit, match="pretrain overlays"):
        budget.read_recipes(str(path))


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
    assert "scratch 0 seed 0: frozen R@1" in first and "each 2 seed 0: frozen R@1" in first
    second = invoke("second")
    assert "frozen R@1 0" not in second
    table = (tmp_path / "first" / "pretraining_budget.md").read_text()
    assert "| scratch | 0 | 0 |" in table and "| each | 2 | 0 |" in table
    assert (tmp_path / "second" / "pretraining_budget.md").read_text() == table
    assert not (tmp_path / "out" / "runs").exists() or not any((tmp_path / "out" / "runs").iterdir())
