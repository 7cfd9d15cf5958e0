"""benchmarks/pretrain_step.py's medians: of each step and of its mining, over the rounds after the warm-up."""

import pytest

from tests.benchmarks.scripts import load_benchmark


def test_each_steps_median_is_over_the_rounds_after_the_warm_up(monkeypatch):
    step_bench = load_benchmark("pretrain_step", monkeypatch)
    calls, times = [], {"a": [9.0, 9.0, 1.0, 3.0, 2.0], "b": [9.0, 9.0, 5.0, 4.0, 6.0]}

    def step(name):
        def call(index):
            calls.append((name, index))
            return times[name][index], times[name][index] / 10

        return call

    medians = step_bench.median_steps({"a": step("a"), "b": step("b")}, rounds=3, warmup=2)
    assert calls == [(name, index) for index in range(5) for name in ("a", "b")]
    assert medians == {"a": {"step_s": 2.0, "mining_s": 0.2}, "b": {"step_s": 5.0, "mining_s": 0.5}}


def test_a_whole_run_is_projected_from_its_time_per_step_and_per_validation(monkeypatch):
    step_bench = load_benchmark("pretrain_step", monkeypatch)
    run = {"data": 2.0, "step": 18.0, "validation": 30.0, "validations": 2, "rest": 5.0}  # 200 steps: 0.1 s each, 15 s a validation
    # conf/cpu's 5,600 steps validate at 0, 500, ..., 5,500 and at the end: 13 validations
    assert step_bench.projected(run, 200, 5600, 500) == pytest.approx(0.1 * 5600 + 15 * 13 + 5)
    assert step_bench.projected(run, 200, 5000, 500) == pytest.approx(0.1 * 5000 + 15 * 11 + 5)  # the end is step 5,000
    assert step_bench.projected(run, 200, 400, None) == pytest.approx(0.1 * 400 + 5)
