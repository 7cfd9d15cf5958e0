"""The report's sections for studies run on their own: the measured table when present, how to make it otherwise."""

from pathlib import Path

import yaml
from kedro.io import DataCatalog

import pytest

from fdsml.reporting.report import generator_variants_section, pa_triplet_study_section, pretraining_budget_section, tuning_section

CATALOG = Path(__file__).resolve().parents[2] / "conf/base/catalog_report.yml"


def test_the_section_shows_the_measured_table_under_its_own_heading():
    section = generator_variants_section("# FineFractalDB generator variants\n\n| arm | runs |\n|---|---:|\n| default | 1 |\n")
    assert section.startswith("## FineFractalDB generator variants\n")
    assert "| default | 1 |" in section
    assert "\n# " not in section


STUDIES = [
    (generator_variants_section, "studies/generator_variants", "kedro run --pipelines=study --params=study.name=generator_variants"),
    (pretraining_budget_section, "studies/pretraining_budget", "kedro run --pipelines=study --params=study.name=pretraining_budget"),
    (pa_triplet_study_section, "studies/pa_triplet_study", "kedro run --pipelines=study --params=study.name=pa_triplet_study"),
    (tuning_section, "tune_study", "kedro run --pipelines=tune"),
]


@pytest.mark.parametrize(("section", "name", "command"), STUDIES)
def test_without_the_table_the_section_says_how_to_make_it(section, name, command):
    text = section(None)
    assert command in text and f"data/08_reporting/{name}." in text


def test_the_budget_section_shows_the_study_under_its_own_heading():
    text = pretraining_budget_section("# Pre-training budget study\n\n| method | steps |\n|---|---|\n| each | 800 |\n")
    assert text.startswith("## Pre-training budget study\n") and "| each | 800 |" in text and "\n# " not in text


@pytest.mark.parametrize(("section", "name", "command"), STUDIES)
def test_the_catalog_reads_the_table_when_present_and_none_before(tmp_path, section, name, command):
    entry = yaml.safe_load(CATALOG.read_text())[f"{name.removeprefix('studies/')}_table"]
    assert entry["dataset"]["filepath"] == f"data/08_reporting/{name}.md"
    entry["dataset"]["filepath"] = str(tmp_path / "table.md")
    catalog = DataCatalog.from_config({"table": entry})
    assert catalog.load("table") is None
    (tmp_path / "table.md").write_text("# table\n")
    assert catalog.load("table") == "# table\n"


def test_the_tuning_section_shows_the_study_and_its_three_pictures():
    text = tuning_section("# Tuning study `pretrain`\n\nBest: trial 3, 0.2571.\n")
    assert text.startswith("## Tuning study\n") and "Best: trial 3, 0.2571." in text and "\n# " not in text
    assert all(f"({name})" in text for name in ("tune_history.png", "tune_importances.png", "tune_slices.png"))
    assert "tune_history.png" not in tuning_section(None)
