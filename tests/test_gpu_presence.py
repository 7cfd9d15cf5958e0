"""``device: auto``: the CPU on a machine without a GPU, a stop on one whose GPU torch cannot use."""

import logging

import pytest
import torch

from fdsml.config import ConfigError
from fdsml.distributed import resolve_device
from fdsml.gpu_presence import cuda_unusable_reason, nvidia_gpu_evidence

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the behaviour where torch sees no GPU")


def no_gpu(tmp_path):
    (tmp_path / "dev").mkdir(exist_ok=True)
    (tmp_path / "dev" / "null").touch()
    return tmp_path / "no-driver", tmp_path / "dev"


def test_the_driver_or_a_device_node_shows_a_gpu(tmp_path):
    driver, nodes = no_gpu(tmp_path)
    assert nvidia_gpu_evidence(driver, nodes) is None
    (nodes / "nvidia0").touch()
    (nodes / "nvidiactl").touch()
    assert nvidia_gpu_evidence(driver, nodes) == f"device node(s) {nodes / 'nvidia0'}, {nodes / 'nvidiactl'}"
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05\nGCC version: 12\n")
    assert nvidia_gpu_evidence(driver, nodes) == f"{driver}: NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05"


def test_auto_without_a_gpu_trains_on_the_cpu(tmp_path):
    assert resolve_device("auto", gpu_evidence=lambda: nvidia_gpu_evidence(*no_gpu(tmp_path))) == torch.device("cpu")


@pytest.mark.parametrize("where", ["driver", "node"])
def test_auto_with_a_gpu_torch_cannot_use_stops_and_says_how_to_force_the_cpu(tmp_path, where):
    driver, nodes = no_gpu(tmp_path)
    if where == "driver":
        driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.82.01\n")
    else:
        (nodes / "nvidia3").touch()
    with pytest.raises(ConfigError) as raised:
        resolve_device("auto", gpu_evidence=lambda: nvidia_gpu_evidence(driver, nodes))
    message = str(raised.value)
    assert "470.82.01" in message if where == "driver" else str(nodes / "nvidia3") in message
    assert "torch cannot use" in message and "device: cpu" in message
    assert torch.__version__ in message  # the cause: torch's own reason, with its version
    assert resolve_device("cpu", gpu_evidence=lambda: nvidia_gpu_evidence(driver, nodes)) == torch.device("cpu")


def test_cuda_without_one_stops_naming_the_cpu_as_the_way_out():
    with pytest.raises(ConfigError, match="device: cuda was asked for .*set device: cpu"):
        resolve_device("cuda", gpu_evidence=lambda: None)


def test_the_reason_names_cuda_visible_devices_when_it_is_set(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "CUDA_VISIBLE_DEVICES=''" in cuda_unusable_reason()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert "CUDA_VISIBLE_DEVICES" not in cuda_unusable_reason()
