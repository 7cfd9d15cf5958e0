"""Citations of the method stay honest: every one names docs/method.md, every cited section exists,
and every module or function docs/method.md points at exists in ``src/fdsml``; no file names an issue number.

The method's specification given to developers is not in the repository, so a citation of it would
send a reader nowhere: docs/method.md is the method in the project's own words, numbered so that
``§N`` (or ``§N.M``) in code, configuration and docs names one of its sections. The section sign is
kept for these citations alone. This file spells both with escapes, so it never cites anything itself.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.project.pages import github_anchor, text_files
from tests.support import ROOT

METHOD = ROOT / "docs" / "method.md"
SRC = ROOT / "src"
SPEC_NAME = "METHOD" + ".md"  # the specification's file name, never written out here
SECTION_SIGN = "\u00a7"
CITATION = re.compile(SECTION_SIGN + r"(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)[.\s]", re.MULTILINE)
ANCHOR = re.compile(r"(?:method\.md)?#([a-z0-9_-]+)\)")


def sections(method_text: str) -> set[str]:
    """The numbers of docs/method.md's sections and subsections (``"3"``, ``"3.2"``)."""
    return set(HEADING.findall(method_text))


def anchors(method_text: str) -> set[str]:
    return {github_anchor(line.lstrip("#")) for line in method_text.splitlines() if line.startswith("#")}


def wrong_citations(files: list[tuple[str, str]], known: set[str]) -> list[str]:
    """``path: problem`` for every citation of the specification and every cited section that does not exist."""
    problems = []
    for path, text in files:
        if SPEC_NAME in text:
            problems.append(f"{path}: cites {SPEC_NAME}, which is not in the repository; cite docs/method.md {SECTION_SIGN}N")
        problems += [f"{path}: {SECTION_SIGN}{number} is no section of docs/method.md" for number in CITATION.findall(text) if number not in known]
    return problems


def wrong_anchors(files: list[tuple[str, str]], known: set[str]) -> list[str]:
    """``path: #anchor`` for every link into docs/method.md whose heading does not exist."""
    problems = []
    for path, text in files:
        if path == "docs/method.md":
            links = ANCHOR.findall(text)
        else:
            links = re.findall(r"method\.md#([a-z0-9_-]+)", text)
        problems += [f"{path}: #{anchor}" for anchor in links if anchor not in known]
    return problems


def _module_file(dotted: str) -> Path | None:
    base = SRC.joinpath(*dotted.split("."))
    return next((path for path in (base.with_suffix(".py"), base / "__init__.py") if path.is_file()), None)


def _defined(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The statement of ``body`` that defines ``name`` (a function, class, assignment or import)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return node
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((alias.asname or alias.name) == name for alias in node.names):
            return node
    return None


def resolves(dotted: str) -> bool:
    """Whether ``fdsml.package.module[.name[.member]]`` names a module of src/ and what it defines, read from the source."""
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is None:
            continue
        body = ast.parse(path.read_text()).body
        for name in parts[cut:]:
            node = _defined(body, name)
            if node is None:
                return False
            body = getattr(node, "body", [])
        return True
    return False


def code_pointers(method_text: str) -> set[str]:
    """Every ``fdsml.…`` name in backticks, and ``fdsml.module`` (``name``, ``name``) as ``fdsml.module.name``."""
    pointers = set(re.findall(r"`(fdsml(?:\.\w+)+)`", method_text))
    for module, listed in re.findall(r"`(fdsml(?:\.\w+)+)`\s*\(([^)]*)\)", method_text):
        pointers |= {f"{module}.{name}" for name in re.findall(r"`(\w+)`", listed)}
    return pointers


def test_no_file_cites_the_specification_and_every_cited_section_exists():
    problems = wrong_citations(text_files(), sections(METHOD.read_text()))
    assert not problems, "\n".join(problems)


def test_every_link_into_method_md_names_a_heading():
    problems = wrong_anchors(text_files(), anchors(METHOD.read_text()))
    assert not problems, "links to headings docs/method.md does not have:\n" + "\n".join(problems)


def test_every_code_pointer_of_method_md_exists():
    pointers = code_pointers(METHOD.read_text())
    assert len(pointers) > 100, "docs/method.md should point at the code of every formula"
    missing = sorted(pointer for pointer in pointers if not resolves(pointer))
    assert not missing, "docs/method.md points at code that does not exist:\n" + "\n".join(missing)


ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? #?\d+|\(#\d+\)")


def test_no_file_refers_to_an_issue_number():
    """A reader has no tracker: code and docs say what was found or decided, not where it was discussed."""
    found = [f"{path}: {match}" for path, text in text_files() for match in ISSUE_NUMBER.findall(text)]
    assert not found, "say the thing itself instead of its issue number:\n" + "\n".join(found)


def test_the_sections_the_code_cites_are_numbered_in_method_md():
    assert {"1", "2", "3", "4", "5", "6", "7", "8", "2.2", "5.5", "7.2"} <= sections(METHOD.read_text())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"see docs/method.md {SECTION_SIGN}3.2", []),
        (f"see docs/method.md {SECTION_SIGN}42", [f"a.py: {SECTION_SIGN}42 is no section of docs/method.md"]),
        (f"see docs/method.md {SECTION_SIGN}3.9", [f"a.py: {SECTION_SIGN}3.9 is no section of docs/method.md"]),
        (f"as {SPEC_NAME} says", [f"a.py: cites {SPEC_NAME}, which is not in the repository; cite docs/method.md {SECTION_SIGN}N"]),
    ],
)
def test_the_check_finds_a_wrong_citation(text, expected):
    method = "## 3. A section\n\n### 3.2 A subsection\n"
    assert wrong_citations([("a.py", text)], sections(method)) == expected


def test_the_check_finds_a_wrong_anchor_and_a_missing_pointer():
    known = anchors("## 3. The PA-Triplet loss\n")
    assert known == {"3-the-pa-triplet-loss"}
    link = "method.md" + "#"  # split, so this file links nowhere itself
    page = f"[x]({link}3-the-pa-triplet-loss) [y]({link}9-nothing)"
    assert wrong_anchors([("docs/a.md", page)], known) == ["docs/a.md: #9-nothing"]
    assert resolves("fdsml.ifs.descriptor.psi") and resolves("fdsml.losses.pa_triplet.PATripletLoss.forward")
    assert not resolves("fdsml.ifs.descriptor.phi") and not resolves("fdsml.ifs.no_such_module")


def test_the_issue_pattern_finds_the_usual_forms():
    number = "38"  # kept apart from the words, so this file names no issue itself
    text = f"as issue {number} found (#{number}), Issues {number} and issue #{number}; a tissue {number}"
    assert ISSUE_NUMBER.findall(text) == [f"issue {number}", f"(#{number})", f"Issues {number}", f"issue #{number}"]
