"""Generator variants side by side: overrides, one entry per variant, and the script's tiny run end to end."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from fdsml.experiment_queue import printed
from fdsml.losses.candidates import FILTERS
from fdsml.validation.agreement import SAME_POSITION_GROUPS
from fdsml.config import with_overlay
from fdsml.validation.variants import AGREEMENT_KEYS, SWEEP_KEYS

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "generator_variants.py"


def load_script():
    spec = importlib.util.spec_from_file_location("generator_variants", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_variant_names_existing_parameters_and_each_choice_changes_alone():
    script = load_script()
    base = script.base_parameters()
    for overrides in [*script.VARIANTS.values(), *script.SCALES.values()]:
        with_overlay(base, overrides, only_existing=True)
    variants = script.VARIANTS
    assert len(variants) >= 10 and variants["default"] == {}
    assert {key for overrides in variants.values() for key in overrides} >= {
        "fractals.perturbation.scope",
        "fractals.perturbation.factor",
        "fractals.perturbation.positions_per_class",
        "fractals.sampler",
        "fractals.class_filter.min_fill",
    }


def test_the_tiny_run_writes_every_figure_for_two_variants(tmp_path, monkeypatch):
    script = load_script()
    monkeypatch.setattr(sys, "argv", ["generator_variants.py", "--tiny", "--output-dir", str(tmp_path), "--storage", str(tmp_path / "arms.log")])
    script.main()
    result = json.loads((tmp_path / "generator_variants.json").read_text())
    entries = result["variants"]
    assert [entry["name"] for entry in entries] == ["default", "one map"]
    assert entries[1]["overrides"] == {"fractals.perturbation.scope": "one_map"}
    for entry in entries:
        assert set(AGREEMENT_KEYS) <= set(entry)
        assert set(entry["agreement"]) == set(FILTERS)
        assert all(low <= entry["agreement"][f] <= high for f, (low, high) in entry["agreement_ci95"].items())
        assert set(entry["label_rule_agreement"]) == {"each"} and "each" in entry["same_positive_rate"]
        assert set(entry["same_by_position"]) == set(SAME_POSITION_GROUPS)
        assert set(entry["sweeps"]) == {"[0.6, 1.4]", "[0.2, 1.8]"}
        for block in entry["sweeps"].values():
            assert set(SWEEP_KEYS) <= set(block)
        assert 0 < entry["class_filter_acceptance_rate"] <= 1
    table = (tmp_path / "generator_variants.md").read_text()
    assert "| one map | `fractals.perturbation.scope=one_map` |" in table
    assert "s in [0.2, 1.8]" in table


def test_a_second_tiny_run_measures_nothing_again_and_writes_the_same_table(tmp_path, monkeypatch, caplog):
    script = load_script()
    caplog.set_level("INFO", logger="generator_variants")
    for output in ("first", "second"):
        monkeypatch.setattr(sys, "argv", ["generator_variants.py", "--tiny", "--output-dir", str(tmp_path / output), "--storage", str(tmp_path / "arms.log")])
        script.main()
        if output == "first":
            assert caplog.text.count("done in") == 2
            caplog.clear()
    assert "done in" not in caplog.text
    first, second = (json.loads((tmp_path / output / "generator_variants.json").read_text()) for output in ("first", "second"))
    assert first["variants"] == second["variants"] and len(first["variants"]) == 2
    assert (tmp_path / "first" / "generator_variants.md").read_text() == (tmp_path / "second" / "generator_variants.md").read_text()


def test_the_grid_prints_as_dvc_experiments_on_the_validate_descriptor_stage():
    script = load_script()
    commands = printed(script.experiments(script.SCALES["full"], script.VARIANTS))
    assert len(commands) == len(script.VARIANTS)
    assert all(command.startswith("dvc exp run validate_descriptor ") for command in commands)
    assert "-S 'conf/base/parameters_fractals.yml:fractals.perturbation.scope=\"one_map\"'" in commands[1]
    assert "-S conf/base/parameters_validate_descriptor.yml:validate_descriptor.n_triplets=3000" in commands[0]


def test_the_grid_combines_every_open_choice_and_starts_at_todays_default():
    script = load_script()
    base = script.base_parameters()
    grid = script.grid_variants()
    assert len(grid) >= 40 and len(grid) == len({json.dumps(o, sort_keys=True) for o in grid.values()})
    assert next(iter(grid.values())) == {}
    for overrides in grid.values():
        with_overlay(base, overrides, only_existing=True)
    assert grid["uniform N 2..4, no class filter, 1 position per class, one map"] == {
        "fractals.sampler": "uniform",
        "fractals.uniform.n_maps": [2, 4],
        "fractals.class_filter.enabled": False,
        "fractals.perturbation.positions_per_class": 1,
        "fractals.perturbation.scope": "one_map",
    }


def test_the_tiny_grid_writes_the_same_table_for_two_combinations(tmp_path, monkeypatch):
    script = load_script()
    monkeypatch.setattr(sys, "argv", ["generator_variants.py", "--grid", "--tiny", "--output-dir", str(tmp_path), "--storage", str(tmp_path / "arms.log")])
    script.main()
    result = json.loads((tmp_path / "generator_grid.json").read_text())
    assert result["mode"] == "grid" and [entry["name"] for entry in result["variants"]] == list(script.grid_variants())[:2]
    assert all(set(AGREEMENT_KEYS) <= set(entry) for entry in result["variants"])
    assert all(set(entry["cpu_seconds"]) == {"generation", "triplets", "sweeps", "statistics"} for entry in result["variants"])
    assert result["cpu_seconds"] >= sum(sum(entry["cpu_seconds"].values()) for entry in result["variants"]) * 0.9
    assert "| sigma factor N 2..4, fill >= 0.2, 6 positions, one map | `fractals.perturbation.scope=one_map` |" in (
        tmp_path / "generator_grid.md"
    ).read_text()


def test_the_grid_runs_at_todays_full_scale(capsys, monkeypatch):
    """Each combination at the single variants' full scale (50 x 100, 3,000 triplets, 300 sweeps), not a reduced one."""
    script = load_script()
    monkeypatch.setattr(sys, "argv", ["generator_variants.py", "--grid", "--print-dvc", "--only", "uniform N 2..4, fill >= 0.25, 6 positions, one map"])
    script.main()
    command = capsys.readouterr().out
    for key, value in script.SCALES["full"].items():
        assert f"{key}={json.dumps(value)}" in command
