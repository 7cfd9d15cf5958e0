"""benchmarks/gpu_check.py on a CPU-only machine: the CUDA rows are skipped with the reason, the rest
run, each in a child process with a timeout whose output is read, the table written row by row."""

import dataclasses
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.benchmarks.scripts import load_benchmark


@pytest.fixture
def gpu_check(monkeypatch):
    return load_benchmark("gpu_check", monkeypatch)


@pytest.mark.slow  # every row a child process that trains
@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only behaviour")
def test_gpu_check_skips_cuda_rows_and_runs_the_rest_on_the_cpu(gpu_check, capsys, tmp_path):
    results = {name: (status, detail) for name, status, detail in gpu_check.main(["--quick", "--table", str(tmp_path / "table.txt")])}
    printed = capsys.readouterr().out
    assert "No CUDA device" in printed and "checkpoint + exact resume" in printed
    skipped = {name for name, (status, _) in results.items() if status == "skipped"}
    assert skipped == {
        "pre-training resnet18, compiled",
        "pre-training vit_tiny_patch4, compiled",
        "renderer bytes = Numba, every specialisation",
        "kernel alone, 64 px / 4,000 points",
        "kernel alone, 256 px / 100,000 points",
        "pre-training img/s, source device vs render",
        "checkpoint + exact resume",
        "torchrun x2 over NCCL, pretrain()",
    }
    assert all(results[name][1] == "needs a CUDA device" for name in skipped - {"torchrun x2 over NCCL, pretrain()"})
    assert results["torchrun x2 over NCCL, pretrain()"][1] == "needs 2 CUDA devices"
    assert not any(status == "FAIL" for status, _ in results.values()), results
    assert results["CouCE fine-tuning step"][0] == "ok" and "img/s" in results["CouCE fine-tuning step"][1]
    assert (tmp_path / "table.txt").read_text().count("\n") == len(results) + 2


def test_the_quick_device_check_has_the_rows_a_short_loan_needs_renderer_first(gpu_check):
    names = [check.name for check in gpu_check.checks("quick-device")]
    assert names[0] == "renderer bytes = Numba, every specialisation"
    assert {"kernel alone, 64 px / 4,000 points", "kernel alone, 256 px / 100,000 points", "host packing per image",
            "pre-training img/s, source device vs render", "pre-training resnet50", "pre-training resnet50, compiled",
            "pre-training vit_tiny_patch16_224", "pre-training vit_tiny_patch16_224, compiled", "checkpoint + exact resume"} == set(names[1:])
    assert gpu_check.QUICK_DEVICE_BUDGET_S <= 8 * 60


def test_rows_run_in_children_with_timeouts_and_the_table_is_written_as_they_go(gpu_check, monkeypatch, tmp_path):
    table = tmp_path / "table.txt"
    seen_before = []
    row_in_child = gpu_check.row_in_child

    def watched(mode, index, folder, timeout_s):
        seen_before.append(table.read_text() if table.exists() else "")
        return row_in_child(mode, index, folder, timeout_s)

    monkeypatch.setattr(gpu_check, "row_in_child", watched)
    rows = {check.name: (index, check) for index, check in enumerate(gpu_check.checks("quick"))}
    packing = rows["host packing per image"]
    couce = (rows["CouCE fine-tuning step"][0], dataclasses.replace(rows["CouCE fine-tuning step"][1], limit_s=1.0))
    started = time.monotonic()
    results = gpu_check.run_checks("quick", [packing, couce], table)
    assert time.monotonic() - started < 60
    assert results[0][:2] == ("host packing per image", "ok") and "µs/image" in results[0][2]
    assert results[1][:2] == ("CouCE fine-tuning step", "TIMEOUT") and "stopped after 1 s" in results[1][2]
    assert "host packing per image  ok" in seen_before[1]  # written before the next row began
    assert "TIMEOUT" in table.read_text()


def test_rows_left_when_the_budget_is_spent_are_written_as_not_run(gpu_check, monkeypatch, tmp_path):
    monkeypatch.setitem(gpu_check.MODES, "quick", 60)
    monkeypatch.setattr(gpu_check, "MIN_ROW_S", 61)
    rows = [(index, check) for index, check in enumerate(gpu_check.checks("quick")) if not check.gpus][:2]
    results = gpu_check.run_checks("quick", rows, tmp_path / "table.txt")
    assert [status for _, status, _ in results] == ["not run", "not run"]
    assert "the 1-minute budget is spent" in (tmp_path / "table.txt").read_text()


def test_a_child_with_a_flood_of_output_finishes_and_a_hung_one_is_killed_with_its_children(gpu_check, tmp_path):
    flood = "import sys\nfor _ in range(4000): sys.stdout.write('x' * 1000 + '\\n')\nprint('done')"
    status, last_line = gpu_check.run_child([sys.executable, "-c", flood], tmp_path / "flood.log", timeout_s=60)
    assert status == 0 and last_line == "done" and (tmp_path / "flood.log").stat().st_size > 4_000_000  # more than a pipe holds
    hung = "import subprocess, time\nprint(subprocess.Popen(['sleep', '60']).pid, flush=True)\ntime.sleep(60)"
    started = time.monotonic()
    status, last_line = gpu_check.run_child([sys.executable, "-c", hung], tmp_path / "hung.log", timeout_s=1.5)
    assert status is None and time.monotonic() - started < 20
    grandchild = int(last_line)
    time.sleep(0.2)
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split()[2]


def test_a_row_that_runs_a_test_passes_only_when_the_test_passed(gpu_check, tmp_path):
    passing = "tests/ifs/test_render_triton.py::test_walkers_must_be_a_power_of_two"
    status, detail = gpu_check.check_test("cpu", gpu_check.QUICK, tmp_path, passing)
    assert status == "ok" and detail.startswith("test_walkers_must_be_a_power_of_two passed in ")
    status, detail = gpu_check.check_test("cpu", gpu_check.QUICK, tmp_path, "tests/ifs/test_render_triton.py::no_such_test")
    assert status == "FAIL" and detail == "0 tests ran, not one"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only behaviour")
def test_the_renderer_bytes_row_runs_the_gpu_test_and_a_skip_there_is_a_failure(gpu_check, tmp_path):
    index = [check.name for check in gpu_check.checks("quick")].index("renderer bytes = Numba, every specialisation")
    status, detail = gpu_check.row_in_child("quick", index, tmp_path, 120)
    assert status == "FAIL" and detail.startswith("Skipped: needs a CUDA device"), detail
