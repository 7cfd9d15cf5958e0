"""The project's ``kedro run`` (``--pipeline`` is an alias of ``--pipelines``, without Kedro's deprecation notice) and
``kedro plugins``."""

import pytest
from click.testing import CliRunner

from fdsml import cli

from .fresh_clone import fresh_clone, run


@pytest.fixture
def handed_to_kedro(monkeypatch, tmp_path):
    """The options the project's ``run`` hands to Kedro's (which is not run), from a folder of the test's own: the
    run lock is taken there, not in a checkout where a real run may hold it."""
    monkeypatch.chdir(tmp_path)
    received = {}
    monkeypatch.setattr(cli.kedro_run, "callback", lambda **options: received.update(options))
    return received


@pytest.mark.parametrize(
    ("arguments", "pipelines"),
    [
        (["--pipeline=pretrain"], ["pretrain"]),
        (["-p", "fractals,pretrain"], ["fractals", "pretrain"]),
        (["--pipelines=fractals,pretrain"], ["fractals", "pretrain"]),
    ],
)
def test_pipeline_is_handed_to_kedro_as_pipelines(handed_to_kedro, arguments, pipelines):
    result = CliRunner().invoke(cli.cli, ["run", *arguments])
    assert result.exit_code == 0, result.output
    assert handed_to_kedro["pipelines"] == pipelines and handed_to_kedro["pipeline"] is None


def test_pipeline_and_pipelines_together_are_refused_by_name(handed_to_kedro):
    result = CliRunner().invoke(cli.cli, ["run", "--pipeline=pretrain", "--pipelines=fractals"])
    assert result.exit_code == 2 and "--pipeline is an alias of --pipelines" in result.output
    assert not handed_to_kedro


@pytest.mark.slow  # a kedro command in a child process
def test_the_design_cards_command_answers_a_wrong_parameter_in_two_lines(tmp_path):
    code, output = run("kedro run --pipeline=fractals --params=fractals.n_classes=-3", fresh_clone(tmp_path))
    assert code == 1 and "deprecated" not in output
    assert output.strip().splitlines()[0] == "ConfigError: fractals.n_classes: must be positive, got -3", output
    assert len(output.strip().splitlines()) == 2, output


def test_kedro_plugins_lists_every_registered_name_with_the_module_registering_it():
    from fdsml.data import available_datasets
    from fdsml.families import known_families
    from fdsml.training.pretrain_objectives import known_objectives

    result = CliRunner().invoke(cli.cli, ["plugins"])
    assert result.exit_code == 0, result.output
    sections = {}
    for line in result.output.splitlines():
        if not line.startswith(" "):
            current = sections.setdefault(line.rstrip(":"), {})
        else:
            name, module = line.split()
            current[name] = module
    assert list(sections) == [
        "objectives (pretrain.objective)", "formula families (fractals.family)",
        "retrieval datasets (retrieval.data.dataset)", "classification datasets (classification.datasets[].name)",
    ]
    assert list(sections["objectives (pretrain.objective)"]) == list(known_objectives())
    assert list(sections["formula families (fractals.family)"]) == list(known_families())
    assert list(sections["retrieval datasets (retrieval.data.dataset)"]) == available_datasets()
    assert sections["objectives (pretrain.objective)"]["pa_triplet"] == "fdsml.training.pretrain_objectives.pa_triplet"
    assert sections["retrieval datasets (retrieval.data.dataset)"]["imagefolder"] == "fdsml.data.readers.own_data"
    assert sections["classification datasets (classification.datasets[].name)"]["imagenet100"] == "fdsml.data.readers.image_folder"
@pytest.mark.parametrize(
    ("params", "refusal"),
    [
        ("retrieval.train.max_steps=4,retrieval.train.max_steps=8", "retrieval.train.max_steps is given twice"),
        ("retrieval.train={},retrieval.train.max_steps=8", "retrieval.train and retrieval.train.max_steps are both given"),
    ],
)
def test_a_key_given_twice_in_params_is_refused_naming_it(handed_to_kedro, params, refusal):
    result = CliRunner().invoke(cli.cli, ["run", f"--params={params}"])
    assert result.exit_code == 2 and refusal in result.output, result.output
    assert not handed_to_kedro
    once = CliRunner().invoke(cli.cli, ["run", "--params=retrieval.train.max_steps=4,retrieval.seeds=[0]"])
    assert once.exit_code == 0 and handed_to_kedro["params"] == {"retrieval": {"train": {"max_steps": 4}, "seeds": [0]}}
