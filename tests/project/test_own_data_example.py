"""docs/own-data.md's worked example, run as the page writes it in a fresh copy of the project (its conf/local file,
`kedro run --pipelines=pretrain`, then `--pipelines=retrieval`), on a folder of Omniglot drawings: the table it writes
is the page's (to the byte on the kind of CPU that wrote the page, within a seed's noise on another), and every output
names the folder's dataset."""

import json

import pytest

from fdsml.native_bf16 import cpu_has_native_bf16
from tests.project.own_data_example import (
    cpu_kind,
    example,
    run_example,
    shown_kind,
    shown_table,
    within_noise,
    without_seconds,
)

# The example's table as one commit (4b8ab4c) wrote it on two kinds of CPU, one thread each: an AMD EPYC that computes
# bf16 natively (the trunk fine-tuned in bf16), and an Intel Xeon without bf16 instructions (in float32; the CI run
# that failed on it).
UNTRAINED = """\
| | rate | recall@1 | recall@2 | recall@4 | recall@8 | map@r | r_precision | nmi |
|---|---|---:|---:|---:|---:|---:|---:|---:|
| raw pixels (k-NN) | | 16.7 | 18.8 | 20.8 | 29.2 | 16.7 | 16.7 | 72.4 |
| scratch, frozen trunk | | 12.5 | 16.7 | 25.0 | 39.6 | 12.5 | 12.5 | 76.7 |
"""  # the header and the rows no training computes: the same on both
EPYC = UNTRAINED + """\
| scratch, fine-tuned | 0.0003 (chosen on validation) | 8.3 | 18.8 | 25.0 | 27.1 | 8.3 | 8.3 | 75.4 |
| fdsml, frozen trunk | | 4.2 | 16.7 | 25.0 | 31.2 | 4.2 | 4.2 | 77.2 |
| fdsml, fine-tuned | 0.0003 (chosen on validation) | 10.4 | 20.8 | 25.0 | 37.5 | 10.4 | 10.4 | 74.5 |"""
XEON = UNTRAINED + """\
| scratch, fine-tuned | 0.0003 (chosen on validation) | 12.5 | 16.7 | 22.9 | 29.2 | 12.5 | 12.5 | 75.8 |
| fdsml, frozen trunk | | 6.2 | 14.6 | 20.8 | 31.2 | 6.2 | 6.2 | 77.4 |
| fdsml, fine-tuned | 0.0003 (chosen on validation) | 10.4 | 12.5 | 18.8 | 37.5 | 10.4 | 10.4 | 76.1 |"""


@pytest.mark.slow  # a fresh copy, a minute of pre-training and the example's fine-tunings: about 10 minutes on 2 busy cores
def test_the_worked_example_writes_the_pages_table_and_names_the_folder_in_every_output(tmp_path):
    _, _, commands = example()
    assert commands == ["kedro run --pipelines=pretrain", "kedro run --pipelines=retrieval"]
    project, outputs = run_example(tmp_path / "project")
    said = " ".join(outputs[1].split())  # the console wraps its lines
    assert "Retrieval on imagefolder-drawings: budget: 30 epochs of the training split (retrieval.train.epochs)" in said
    table = (project / "data/08_reporting/retrieval_table.md").read_text().rstrip("\n")
    here = cpu_kind()
    if here == shown_kind():
        assert without_seconds(table) == without_seconds(shown_table()), "the page's table is not what the example writes: python -m tests.project.own_data_example"
    else:
        assert within_noise(table, shown_table()) == [], f"on a CPU of kind {here} (the page's: {shown_kind()})"
    assert without_seconds(table) != table  # the rate searches' seconds were left out, and nothing else
    metrics = json.loads((project / "data/08_reporting/retrieval_metrics.json").read_text())
    assert list(metrics) == ["scratch", "fdsml"]
    for start in metrics.values():
        assert start["dataset"] == "imagefolder-drawings" and start["rate"]["source"] == "chosen on validation"
        assert set(start["baselines"]) == {"raw pixels", "its frozen trunk"} and start["queries"] == 48
    runs = project / "data/06_models/retrieval_runs/imagefolder-drawings"
    assert {p.name for p in runs.iterdir()} == {"scratch_seed0", "fdsml_seed0", "rate_search"}
    assert len(list((runs / "rate_search").iterdir())) == 4  # two rates for each of the two starts


def test_one_commits_tables_on_two_kinds_of_cpu_are_within_a_seeds_noise():
    assert within_noise(XEON, EPYC) == [] and within_noise(EPYC, XEON) == []


def test_a_trained_figure_beyond_three_standard_errors_departs_and_is_named():
    untrained = XEON.replace("| 10.4 | 12.5 | 18.8 | 37.5 | 10.4 | 10.4 |", "| 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 |")
    departures = within_noise(untrained, EPYC)
    # at the page's 37.5 and 0.0, 3 standard errors of the difference on 48 queries: 300 * sqrt(2 p (1 - p) / 48), p = 18.75 %
    assert "fdsml, fine-tuned recall@8: 0.0 against the page's 37.5 (more than 23.9 apart)" in departures
    assert not any("recall@1" in departure for departure in departures)  # 10.4 -> 0.0: within 3 standard errors
    assert not any(departure.startswith("scratch") for departure in departures)


def test_an_untrained_row_must_repeat_exactly_and_the_texts_must_agree():
    assert within_noise(XEON.replace("| 72.4 |", "| 72.5 |"), EPYC) == [
        "raw pixels (k-NN): | raw pixels (k-NN) | | 16.7 | 18.8 | 20.8 | 29.2 | 16.7 | 16.7 | 72.5 | against the page's "
        "| raw pixels (k-NN) | | 16.7 | 18.8 | 20.8 | 29.2 | 16.7 | 16.7 | 72.4 |"
    ]
    assert within_noise(XEON.replace("chosen on validation", "given"), EPYC) == ["the tables' text differs"]


def test_this_cpus_kind_names_its_precision_onednns_instruction_set_and_atens_vector_width():
    precision, onednn, aten = cpu_kind().split("; ")
    assert precision == ("native bf16" if cpu_has_native_bf16() else "no native bf16 (float32)")
    assert onednn.startswith("oneDNN ") and len(onednn) > len("oneDNN ")
    assert aten.removeprefix("ATen ") in {"DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256"}
