"""A page embedded in the report keeps working links: its relative targets are rebased onto the report's folder."""

import re

from fdsml.reporting.embedding import embed_page, rebase_links
from fdsml.reporting.report import STUDY_PAGES, pretraining_budget_section

TARGETS = re.compile(r"\]\(([^)\s]+)")
UNTOUCHED = ["https://example.org/figure.png", "#reproduce", "/srv/pictures/figure.png", "mailto:team@example.org"]


def page_in(report_dir, folder):
    """A page in ``report_dir/folder`` linking a picture beside it, a file in a subfolder, one above it with a fragment,
    and the targets that are not relative; the files it links exist."""
    page_dir = report_dir / folder
    (page_dir / "data").mkdir(parents=True)
    (page_dir / "budget.png").write_bytes(b"\x89PNG")
    (page_dir / "data" / "budget.json").write_text("{}")
    (page_dir.parent / "samples.png").write_bytes(b"\x89PNG")
    return (
        "# Budget\n\nThe table.\n\n![Recall@1 against steps](budget.png)\n\n"
        "[the results](data/budget.json) and [the samples](../samples.png#top) "
        + " ".join(f"[away]({target})" for target in UNTOUCHED)
        + "\n\n[results]: <data/budget.json>\n"
    )


def test_relative_targets_of_a_page_in_a_subfolder_resolve_from_the_report_folder(tmp_path):
    report_dir = tmp_path / "reporting"
    embedded = embed_page(page_in(report_dir, "studies/budget"), "studies/budget")
    targets = TARGETS.findall(embedded)
    relative = [target for target in targets if target not in UNTOUCHED]
    assert relative == ["studies/budget/budget.png", "studies/budget/data/budget.json", "studies/samples.png#top"]
    assert all((report_dir / target.split("#")[0]).is_file() for target in relative)
    assert [target for target in targets if target in UNTOUCHED] == UNTOUCHED  # absolute URLs, anchors and paths as written
    assert "[results]: <studies/budget/data/budget.json>" in embedded and (report_dir / "studies/budget/data/budget.json").is_file()
    assert not embedded.startswith("# Budget")  # the report gives the section its heading


def test_the_budget_section_links_the_study_figure_from_the_report_folder(tmp_path):
    page = page_in(tmp_path, STUDY_PAGES)
    section = pretraining_budget_section(page)
    assert f"![Recall@1 against steps]({STUDY_PAGES}/budget.png)" in section
    assert (tmp_path / f"{STUDY_PAGES}/budget.png").is_file()


def test_a_page_beside_the_report_and_targets_inside_code_are_left_as_written():
    page = "Run `![x](y.png)` then:\n\n```\n[a](b.md)\n```\n\n![figure](figure.png)\n"
    assert rebase_links(page, ".") == page
    assert rebase_links(page, "studies") == page.replace("(figure.png)", "(studies/figure.png)")
