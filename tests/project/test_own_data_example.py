"""docs/own-data.md's worked example, run as the page writes it in a fresh copy of the project (its conf/local file,
`kedro run --pipelines=pretrain`, then `--pipelines=retrieval`), on a folder of Omniglot drawings: the table it writes
is the page's, and every output names the folder's dataset."""

import json

import pytest

from tests.project.own_data_example import example, run_example, shown_table, without_seconds


@pytest.mark.slow  # a fresh copy, a minute of pre-training and the example's fine-tunings: about 10 minutes on 2 busy cores
def test_the_worked_example_writes_the_pages_table_and_names_the_folder_in_every_output(tmp_path):
    _, _, commands = example()
    assert commands == ["kedro run --pipelines=pretrain", "kedro run --pipelines=retrieval"]
    project, outputs = run_example(tmp_path / "project")
    said = " ".join(outputs[1].split())  # the console wraps its lines
    assert "Retrieval on imagefolder-drawings: budget: 30 epochs of the training split (retrieval.train.epochs)" in said
    table = (project / "data/08_reporting/retrieval_table.md").read_text().rstrip("\n")
    assert without_seconds(table) == without_seconds(shown_table()), "the page's table is not what the example writes: python -m tests.project.own_data_example"
    assert without_seconds(table) != table  # the rate searches' seconds were left out, and nothing else
    metrics = json.loads((project / "data/08_reporting/retrieval_metrics.json").read_text())
    assert list(metrics) == ["scratch", "fdsml"]
    for start in metrics.values():
        assert start["dataset"] == "imagefolder-drawings" and start["rate"]["source"] == "chosen on validation"
        assert set(start["baselines"]) == {"raw pixels", "its frozen trunk"} and start["queries"] == 48
    runs = project / "data/06_models/retrieval_runs/imagefolder-drawings"
    assert {p.name for p in runs.iterdir()} == {"scratch_seed0", "fdsml_seed0", "rate_search"}
    assert len(list((runs / "rate_search").iterdir())) == 4  # two rates for each of the two starts
