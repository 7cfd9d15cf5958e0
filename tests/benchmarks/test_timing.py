"""benchmarks/timing.py, what the scripts share: the rounds alternate what they compare, the warm-up is left out,
the fastest call is kept, and the result prints as one JSON line or aligned lines."""

import json
import time

from tests.benchmarks.scripts import load_benchmark


def test_the_calls_alternate_round_by_round_and_the_warm_up_is_left_out(monkeypatch):
    timing = load_benchmark("timing", monkeypatch)
    calls = []

    def call(name):
        def record(round_):
            calls.append((name, round_))
            return f"{name}{round_}"

        return record

    results = timing.interleaved({"a": call("a"), "b": call("b")}, rounds=2, warmup=1)
    assert calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert results == {"a": ["a1", "a2"], "b": ["b1", "b2"]}


def test_the_fastest_of_the_repeats_is_kept(monkeypatch):
    timing = load_benchmark("timing", monkeypatch)
    measured = iter([0.3, 0.1, 0.2])
    monkeypatch.setattr(timing, "seconds", lambda work, device: next(measured))
    assert timing.best_seconds(lambda: None, repeats=3) == 0.1


def test_the_host_clock_times_the_work_on_the_cpu(monkeypatch):
    timing = load_benchmark("timing", monkeypatch)
    assert 0.05 <= timing.seconds(lambda: time.sleep(0.05)) < 5


def test_the_result_prints_as_one_json_line_or_as_aligned_lines(monkeypatch, capsys):
    timing = load_benchmark("timing", monkeypatch)
    timing.print_result({"size": 64, "agrees": True}, as_json=True)
    assert json.loads(capsys.readouterr().out) == {"size": 64, "agrees": True}
    timing.print_result({"size": 64, "agrees": True}, as_json=False)
    assert capsys.readouterr().out == "  size: 64\nagrees: True\n"


def test_the_common_options_are_there_when_asked_for(monkeypatch):
    timing = load_benchmark("timing", monkeypatch)
    args = timing.parser("A benchmark.\n\nMore.", "--threads", "--json", threads=1).parse_args(["--json"])
    assert (args.threads, args.json) == (1, True)
    assert timing.parser("A benchmark.", "--threads").parse_args([]).threads is None  # torch's choice
    assert timing.parser("A benchmark.").description == "A benchmark."
    assert not hasattr(timing.parser("A benchmark.").parse_args([]), "threads")


def test_an_environment_overrides_conf_base_key_by_key_as_kedro_run_reads_it(monkeypatch):
    timing = load_benchmark("timing", monkeypatch)
    params = timing.parameters("cpu")
    assert params["pretrain"]["objective"] == "fdsl" and params["pretrain"]["train"]["max_steps"] == 5600  # conf/cpu's
    assert params["pretrain"]["model"]["backbone"] == "resnet18" and params["pretrain"]["data"]["classes_per_batch"] == 8  # conf/base's
    assert params["fractals"]["render"]["size"] == 48 and "holdout" in params["fractals"]
