"""benchmarks/host_syncs.py's device-source count: the kernel's path reads nothing back to the host
(recorded under Triton's interpreter without a GPU), where the CPU path's reads are seen."""

import os
import subprocess
import sys

import pytest
import torch

from tests.benchmarks.scripts import BENCHMARKS

SCRIPT = f"""
import collections, sys
sys.path.insert(0, {str(BENCHMARKS)!r})
import torch
import host_syncs
kernel = host_syncs.device_source_reads(torch.device("cpu"), 2)
from fdsml.data.device_render import DeviceRenderedCodes
model_input = DeviceRenderedCodes.model_input
DeviceRenderedCodes.model_input = lambda self, packed, kernel=None: model_input(self, packed, kernel=False)
numba = host_syncs.device_source_reads(torch.device("cpu"), 2)
print(sum(kernel.values()), sum(numba.values()), sorted(numba))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="the recorded count, without a GPU")
def test_the_device_sources_rendering_reads_nothing_back_to_the_host():
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    kernel, numba, lines = done.stdout.strip().splitlines()[-1].split(" ", 2)
    assert int(kernel) == 0
    assert int(numba) >= 4 and "device_render.py" in lines and "tolist" in lines  # the count sees the host path's reads
