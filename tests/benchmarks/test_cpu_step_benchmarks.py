"""The arithmetic of the CPU precision and step benchmarks: parity's end points and paired differences, the interleaving."""

import math

import pandas as pd

from tests.benchmarks.scripts import load_benchmark


def test_parity_reads_each_validation_columns_last_measured_value(monkeypatch):
    parity = load_benchmark("precision_parity", monkeypatch)
    history = pd.DataFrame(
        {
            "step": [0, 1, 2, 3],
            "loss": [math.nan, 2.0, 1.5, 1.0],
            "val_probe_recall_at_1": [0.1, math.nan, 0.3, math.nan],
            "val_unseen_agreement_same": [0.5, math.nan, math.nan, 0.6],
            "val_unseen_region_top1": [math.nan] * 4,  # never measured: left out
        }
    )
    assert parity.last_validation(history) == {"val_probe_recall_at_1": 0.3, "val_unseen_agreement_same": 0.6}


def test_parity_table_gives_means_and_the_paired_difference(monkeypatch):
    parity = load_benchmark("precision_parity", monkeypatch)
    results = {
        "base/float32/0": {"definition": {}, "m": 0.50},
        "base/bf16/0": {"definition": {}, "m": 0.53},
        "base/float32/1": {"definition": {}, "m": 0.60},
        "base/bf16/1": {"definition": {}, "m": 0.61},
        "base/bf16/2": {"definition": {}, "m": 0.99},  # no float32 partner: in its column's mean, not in the paired difference
    }
    [row] = [line for line in parity.table(results, "base", [0, 1, 2]).splitlines() if line.startswith("| m |")]
    # float32 0.55 +- 0.0707; bf16 over 0.53, 0.61, 0.99: mean 0.71, sd 0.2458; paired 0.03 and 0.01: 0.02 +- 0.0141
    assert row == "| m | 0.5500 ± 0.0707 | 0.7100 ± 0.2458 | 0.0200 ± 0.0141 |"


def test_dotted_keys_set_a_copy(monkeypatch):
    parity = load_benchmark("precision_parity", monkeypatch)
    tree = {"train": {"seed": 0, "amp": True}, "run_dir": "x"}
    assert parity._set(tree, "train.amp", False) == {"train": {"seed": 0, "amp": False}, "run_dir": "x"}
    assert tree["train"]["amp"] is True


def test_the_steps_alternate_round_by_round_and_the_warm_up_is_left_out(monkeypatch):
    step_bench = load_benchmark("pretrain_step", monkeypatch)
    calls, times = [], {"a": [9.0, 9.0, 1.0, 3.0, 2.0], "b": [9.0, 9.0, 5.0, 4.0, 6.0]}

    def step(name):
        def call(index):
            calls.append((name, index))
            return times[name][index], 0.0

        return call

    medians = step_bench.interleaved({"a": step("a"), "b": step("b")}, rounds=3, warmup=2)
    assert calls == [(name, index) for index in range(5) for name in ("a", "b")]
    assert medians == {"a": {"step_s": 2.0, "mining_s": 0.0}, "b": {"step_s": 5.0, "mining_s": 0.0}}
