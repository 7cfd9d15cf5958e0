"""CPU seconds per stage: a stage's process time, summed over its repeats, recorded even when the stage raises."""

import time

import pytest

from fdsml.timers import CpuSeconds


def busy(seconds: float) -> None:
    """Spend at least ``seconds`` of this process's CPU time."""
    started = time.process_time()
    while time.process_time() - started < seconds:
        sum(range(1000))


def test_a_stage_counts_cpu_time_summed_over_its_repeats_and_not_time_asleep():
    cpu = CpuSeconds()
    with cpu.stage("work"):
        busy(0.05)
    with cpu.stage("work"):
        busy(0.05)
    with cpu.stage("sleep"):
        time.sleep(0.3)
    assert set(cpu.seconds) == {"work", "sleep"}
    assert cpu.seconds["work"] >= 0.1
    assert 0 <= cpu.seconds["sleep"] < 0.1  # 0.3 s of wall time, almost none of CPU


def test_a_stage_that_raises_keeps_its_seconds():
    cpu = CpuSeconds()
    with pytest.raises(RuntimeError), cpu.stage("failing"):
        busy(0.02)
        raise RuntimeError("stage failed")
    assert cpu.seconds["failing"] >= 0.02
