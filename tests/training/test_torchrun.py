"""Pre-training as ``torchrun --nproc_per_node=2`` starts it (two gloo processes on the CPU; NCCL on a machine with two GPUs): a hang
fails the test after a time limit instead of stopping the suite."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.support import ROOT

LIMIT_S = 90  # the run takes about 20 s; a replica waiting on another never ends


def torchrun(out: Path, overrides: dict, replicas: int = 2) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node=REPLICAS`` of :mod:`tests.training.torchrun_worker`; fails the test on a hang."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={replicas}",
        "-m", "tests.training.torchrun_worker", str(out), json.dumps(overrides),
    ]
    launcher = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = launcher.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        launcher.terminate()  # torchrun stops its replicas on SIGTERM (they run in sessions of their own)
        stdout, stderr = launcher.communicate(timeout=60)
        raise AssertionError(f"torchrun did not finish in {LIMIT_S} s (a replica waits on another):\n{stderr[-4000:]}") from None
    return subprocess.CompletedProcess(command, launcher.returncode, stdout, stderr)


ON_TWO_GPUS = pytest.param("cuda", marks=pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices"))


@pytest.mark.slow  # two torchrun replicas pre-train with the probe
@pytest.mark.parametrize("device", ["cpu", ON_TWO_GPUS])  # gloo on the CPU, NCCL on two GPUs (benchmarks/gpu_check.py runs it there)
def test_held_out_validation_with_the_probe_finishes_under_two_replicas(tmp_path, device):
    """The published validation (held-out rows and the frozen probe) on rank 0, while rank 1 trains on."""
    validation = {"every": 2, "triplets": 50, "max_images": 16, "probe": {"image_size": 16, "max_images": 40}}
    finished = torchrun(tmp_path, {"train": {"max_steps": 4, "device": device}, "validation": validation})
    assert finished.returncode == 0, finished.stderr[-4000:]
    first, second = (torch.load(tmp_path / f"rank{rank}.pt", weights_only=True) for rank in range(2))
    validated = [step for step, seconds in zip(first["history"]["step"], first["history"]["validation_s"]) if seconds == seconds]
    assert validated == [0, 2, 4]  # the initialisation's row too: it deadlocked once, outside distributed.alone()
    probe = [value for value in first["history"]["val_probe_recall_at_1"] if value == value]
    assert len(probe) == 3 and all(0 <= value <= 1 for value in probe)
    for name, tensor in first["state_dict"].items():
        torch.testing.assert_close(second["state_dict"][name], tensor, rtol=0, atol=0, msg=name)
