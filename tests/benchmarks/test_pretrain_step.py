"""benchmarks/pretrain_step.py's medians: of each step and of its mining, over the rounds after the warm-up."""

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
