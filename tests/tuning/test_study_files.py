"""Every study file of conf/studies/ parses and its arms validate; a wrong key is refused naming the file, the arm and the closest key."""

import pytest

from fdsml.config import ConfigError
from fdsml.pipelines.study.checks import check_study_params
from tests.support import ROOT
from tests.tuning.study_files import TINY_STUDY, study_project

STUDY_FILES = sorted((ROOT / "conf/studies").glob("*.yml"))


def test_there_is_a_study_file_per_study():
    assert {path.stem for path in STUDY_FILES} >= {"pretraining_budget"}


@pytest.mark.parametrize("path", STUDY_FILES, ids=lambda path: path.stem)
def test_every_study_file_and_each_of_its_scales_validates(path):
    import yaml

    check_study_params({"name": path.stem, "conf_source": str(ROOT / "conf")})
    for scale in yaml.safe_load(path.read_text()).get("scales", {}):
        check_study_params({"name": path.stem, "scale": scale, "conf_source": str(ROOT / "conf")})


def wide_sweeps(factor_range: list[float], key: str = "validate_descriptor.sweep.factor_range", step: str = "sweeps") -> dict:
    """TINY_STUDY's steps and a named step ``wide``: the descriptor's sweeps over another factor range."""
    return {"steps": [*TINY_STUDY["steps"], "wide"], "named_steps": {"wide": {"step": step, "overlay": {key: factor_range}}}}


def refused(tmp_path, change: dict, match: str):
    arms = {"arms": {**TINY_STUDY["arms"], **change.get("arms", {})}}
    project = study_project(tmp_path / "p", {**TINY_STUDY, **change, **arms})
    with pytest.raises(ConfigError, match=match) as raised:
        check_study_params({"name": "tiny", "conf_source": str(project / "conf")})
    assert "conf/studies/tiny.yml" in str(raised.value)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"arms": {"fdsl": {"pretrain.train.max_step": 3}}}, r"arms\.fdsl: .*max_step.*did you mean pretrain\.train\.max_steps"),
        ({"arms": {"fdsl": {"pretrian.objective": "fdsl"}}}, r"arms\.fdsl: pretrian: unknown parameter section; did you mean pretrain\.objective"),
        ({"arms": {"fdsl": {"pretrain.objective": "fdls"}}}, r"arms\.fdsl: .*pretrain\.objective: 'fdls' is not accepted"),
        ({"arms": {"fdsl": {"study.step": ["finetune"]}}}, r"arms\.fdsl: unknown key study\.step \(did you mean study\.steps\?\)"),
        ({"arms": {"fdsl": {"study.steps": ["finetuen"]}}}, r"arms\.fdsl: step 'finetuen' is unknown \(did you mean finetune\?\)"),
        ({"table": {"metrics": ["finetuned.recal@1"]}}, r"table\.metrics: metric 'finetuned\.recal@1' is unknown \(did you mean finetuned\.recall@1\?\)"),
        ({"table": {"metrics": ["frozen.recall@1"], "reference": "scrach"}}, r"table\.reference: 'scrach' is no arm of the study \(did you mean scratch\?\)"),
        ({"table": {"metrics": ["frozen.recall@1"], "arms": ["fdls"]}}, r"table\.arms: 'fdls' is no arm of the study \(did you mean fdsl\?\)"),
        ({"table": {"metrics": ["frozen.recall@1"], "arms": ["fdsl"], "reference": "scratch"}}, r"table\.reference: 'scratch' is not among the table's arms; add it to table\.arms"),
        ({"tabel": {}}, r"unknown key\(s\) tabel \(did you mean study\.table\?\)"),
        ({"table": {"metrics": ["frozen.recall@1"], "every_combination": ["frozen.recal@1"]}}, r"table\.every_combination: metric 'frozen\.recal@1' is unknown"),
        ({"table": {"metrics": ["frozen.recall@1"], "intervals": ["frozen.recall@1"]}}, r"table\.trials: gain and intervals need the parameter"),
        ({"table": {"metrics": ["frozen.recall@1"], "intervals": ["frozen.recall@1"], "trials": "pretrain.validation.triplet"}}, r"table\.trials: 'pretrain\.validation\.triplet' is no parameter"),
        ({"figure": {"x": "pretrain.train.max_steps", "metrics": ["frozen.recall@1"]}}, r"figure\.x: no arm sets 'pretrain\.train\.max_steps'"),
        ({"figure": {"x": "pretrain.objective", "metrics": ["frozen.recal@1"]}}, r"figure\.metrics: metric 'frozen\.recal@1' is unknown"),
        ({"more_tables": {"by seed": {"metrics": ["frozen.recal@1"]}}}, r"more_tables\.by seed\.metrics: metric 'frozen\.recal@1' is unknown"),
        (wide_sweeps([1.8, 0.2]), r"arms\.fdsl: named_steps\.wide\.overlay: validate_descriptor\.sweep\.factor_range: range \[1\.8, 0\.2\] is empty or inverted"),
        (wide_sweeps([0.2, 1.8], "validate_descriptor.sweep.factor_rang"), r"named_steps\.wide\.overlay: validate_descriptor\.sweep\.factor_rang: not a key of the configuration"),
        (wide_sweeps([0.2, 1.8], step="sweep"), r"named_steps\.wide\.step: step 'sweep' is unknown \(did you mean sweeps\?\)"),
        ({**wide_sweeps([0.2, 1.8]), "named_steps": {"pretrain": {"step": "sweeps"}}}, r"named_steps\.pretrain: 'pretrain' is a step already"),
        ({**wide_sweeps([0.2, 1.8]), "table": {"metrics": ["wide.sweeps.n_sweep"]}}, r"table\.metrics: metric 'wide\.sweeps\.n_sweep' is unknown \(did you mean wide\.sweeps\.n_sweeps\?\)"),
    ],
    ids=["arm key", "arm section", "arm value", "study key", "step", "metric", "reference", "table arms", "reference not shown", "file key", "every combination", "no trials", "trials key", "figure x", "figure metric", "more tables",
         "inverted range", "range key", "named step's step", "named step's name", "named step's metric"],
)
def test_a_wrong_key_or_value_is_refused_naming_the_file_and_the_closest_key(tmp_path, change, match):
    refused(tmp_path, change, match)


def test_an_unknown_study_name_names_the_closest_study_file():
    with pytest.raises(ConfigError, match="did you mean pretraining_budget"):
        check_study_params({"name": "pretraining_budgte", "conf_source": str(ROOT / "conf")})
