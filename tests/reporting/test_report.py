"""The report's generator-variants section: the measured table when present, how to make it otherwise."""

from pathlib import Path

import yaml
from kedro.io import DataCatalog

from fdsml.reporting.report import generator_variants_section
from fdsml.validation.report import variants_markdown

CATALOG = Path(__file__).resolve().parents[2] / "conf/base/catalog_report.yml"


def test_the_section_shows_the_measured_table_under_its_own_heading():
    section = generator_variants_section(variants_markdown([]))
    assert section.startswith("## FineFractalDB generator variants\n")
    assert "| variant | overrides | class filter accepts |" in section
    assert "\n# " not in section


def test_without_the_table_the_section_says_how_to_make_it():
    section = generator_variants_section(None)
    assert "python benchmarks/generator_variants.py" in section and "--quick" in section


def test_the_catalog_reads_the_table_when_present_and_none_before(tmp_path):
    entry = yaml.safe_load(CATALOG.read_text())["generator_variants_table"]
    assert entry["dataset"]["filepath"] == "data/08_reporting/generator_variants.md"
    entry["dataset"]["filepath"] = str(tmp_path / "generator_variants.md")
    catalog = DataCatalog.from_config({"generator_variants_table": entry})
    assert catalog.load("generator_variants_table") is None
    (tmp_path / "generator_variants.md").write_text("# table\n")
    assert catalog.load("generator_variants_table") == "# table\n"
