"""What a reader of the repository reads: the pages (the README and docs/), the anchors GitHub gives their headings,
and every text file of the folders a reader opens."""

import re

from tests.support import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCANNED = ("README.md", "Makefile", "pyproject.toml", "dvc.yaml", ".ci", "benchmarks", "conf", "docs", "notebooks", "src", "tests")
SKIPPED_DIRS = {"__pycache__", ".ipynb_checkpoints", "embedded"}


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def text_files() -> list[tuple[str, str]]:
    """``(path relative to the repository, text)`` of every text file a reader of the repository sees."""
    found = []
    for name in SCANNED:
        top = ROOT / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else []
        for path in paths:
            parts = path.relative_to(ROOT).parts
            if SKIPPED_DIRS & set(parts) or any(part.endswith(".egg-info") for part in parts):  # pip's build record, not the repository's
                continue
            try:
                found.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
            except UnicodeDecodeError:
                continue  # a binary file names nothing
    return found
