"""The regime study's files run end to end on the CPU at their ``tiny`` scales, as a user runs them
(``kedro run --pipelines=study --params=study.name=<file>,study.scale=tiny`` is this node): every unit completes, and
the pages carry what the full runs will be read by (the rates per arm, the trend per axis, the GPU check first)."""

import pytest

from fdsml.pipelines.study.nodes import run_study_file
from fdsml.tuning.study_file import read_study, scaled
from tests.support import ROOT

pytestmark = pytest.mark.slow


def run_tiny(name: str, tmp_path) -> tuple[str, dict, object]:
    settings = {"name": name, "scale": "tiny", "conf_source": str(ROOT / "conf"), "storage_dir": str(tmp_path), "run_dir": str(tmp_path / "runs")}
    return run_study_file(settings)


def tiny_arms(name: str) -> list[str]:
    study, _ = scaled(read_study(ROOT / "conf/studies" / f"{name}.yml"), "tiny")
    return list(study.arms)


def test_the_rates_study_fine_tunes_each_of_its_tiny_arms_on_the_validation_alphabet(tmp_path):
    page, found, _ = run_tiny("regime_rates", tmp_path)
    units = found["units"]
    assert sorted({unit["arm"] for unit in units}) == sorted(tiny_arms("regime_rates"))
    for unit in units:
        assert 0.0 <= unit["metrics"]["finetuned.map@r"] <= 1.0
    assert all(f"| {arm} |" in page for arm in tiny_arms("regime_rates"))


def test_the_boundary_study_measures_every_start_and_the_baselines_and_fits_a_trend_along_images_seen(tmp_path):
    page, found, figure = run_tiny("regime_boundary", tmp_path)
    arms = {unit["arm"] for unit in found["units"]}
    assert arms == set(tiny_arms("regime_boundary"))
    pixels = next(unit for unit in found["units"] if unit["arm"] == "pixels")["metrics"]
    assert 0.0 < pixels["pixels.recall@1"] <= 1.0  # raw-pixel k-NN on the test alphabets, beside every start
    for unit in found["units"]:
        if unit["arm"] in {"fdsl", "same", "paper", "scratch"}:  # the base point runs converged too (a named step)
            assert {"frozen.recall@1", "finetuned.recall@1", "converged.finetuned.map@r"} <= set(unit["metrics"])
    seen = found["trend"]["images seen"]["finetuned.recall@1"]
    assert [point["point"] for point in seen["points"]] == ["base", "s1200"]  # the tiny scale stops before 4,800
    assert {point["best_rival"] for point in seen["points"]} <= {"same", "paper"}
    assert "## How the gaps change along each axis" in page and "**images seen: finetuned.recall@1**" in page
    assert len(figure.axes) >= 1


def test_the_paper_ordering_study_runs_the_gpu_check_and_every_start_on_the_cpu(tmp_path):
    page, found, _ = run_tiny("paper_ordering", tmp_path)
    units = found["units"]
    assert {unit["arm"] for unit in units} == set(tiny_arms("paper_ordering"))
    check = next(unit for unit in units if unit["arm"] == "gpu_check")["metrics"]
    assert check["gpu_check.ok"] > 0 and check["gpu_check.fail"] == check["gpu_check.timeout"] == 0  # its CPU rows here
    assert "The baseline: raw-pixel k-NN" in page
    seen = found["trend"]["images seen"]["finetuned.recall@1"]
    assert [point["point"] for point in seen["points"]] == ["base", "s16k"]  # the tiny scale's two points of the axis
    assert "**images seen: finetuned.map@r**" in page
