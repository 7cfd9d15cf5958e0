"""benchmarks/gpu_check.py on a CPU-only machine: the CUDA rows are skipped with the reason, the rest run."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.mark.slow  # three two-process torchrun launches
@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only behaviour")
def test_gpu_check_skips_cuda_rows_and_runs_the_rest_on_the_cpu(capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, gpu_check)  # its dataclasses look their module up
    spec.loader.exec_module(gpu_check)
    results = {name: (status, detail) for name, status, detail in gpu_check.main(["--quick"])}
    printed = capsys.readouterr().out
    assert "No CUDA device" in printed and "checkpoint + exact resume" in printed
    skipped = {name for name, (status, _) in results.items() if status == "skipped"}
    assert skipped == {
        "pre-training resnet18, compiled",
        "pre-training vit_tiny_patch4, compiled",
        "GPU rendering 64 px / 4,000 points",
        "GPU rendering 256 px / 100,000 points",
        "pre-training img/s, source device vs render",
    }
    assert all(results[name][1] == "needs a CUDA device" for name in skipped)
    assert not any(status == "FAIL" for status, _ in results.values()), results
    assert results["checkpoint + exact resume"][1].startswith("max |difference| 0 ")
    assert results["torchrun x2, pretrain()"][1].startswith("gloo, 2 CPU replicas (fewer than 2 GPUs): probe Recall@1 [")
    assert "resumed max |difference| 0 " in results["torchrun x2, pretrain()"][1]
