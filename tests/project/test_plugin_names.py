"""Every plug-in name the configuration's comments and the pages give is one a registry holds (`kedro plugins` lists
them): a renamed or removed objective, family or dataset fails here, not in a reader's run. The lists are examples,
never a roll to keep complete: a new plug-in is one file (docs/plugins.md), and `kedro plugins` lists it.

Read: the ``|`` lists in the comment of a conf key that selects a plug-in (``objective``, ``family``, ``dataset``,
``datasets``, with their continuation lines), ``{name: X}`` entries of the classification datasets, and in the pages'
code (fenced or inline) every ``objective``, ``family`` or ``dataset`` given a value (``objective: X``, ``dataset=X``,
``family: X | Y``)."""

from __future__ import annotations

import re

import pytest

from fdsml.data.classification_datasets import available_classification_datasets
from fdsml.data.retrieval_datasets import available_datasets
from fdsml.families import known_families
from fdsml.training.pretrain_objectives import known_objectives
from tests.plugin_examples import KINDS, name_of
from tests.project.pages import PAGES
from tests.support import ROOT

NAME = r"[a-z][a-z0-9_]*"
SELECTED = re.compile(rf"\b(objective|family|dataset)(?:: |=)({NAME}(?: \| {NAME})*)")
KEYED_COMMENT = re.compile(r"^\s*(-\s*)?(objective|family|dataset|datasets):[^#]*#(.*)$")
CONTINUATION = re.compile(r"^\s*# {2,}(.*)$")
DATASET_ENTRY = re.compile(rf"\{{name: ({NAME}), root:")
EXAMPLES = {name_of(kind) for kind in KINDS}  # docs/plugins.md's worked plug-ins, registered where the page puts them


def registered(key: str) -> set[str]:
    names = {
        "objective": set(known_objectives()),
        "family": set(known_families()),
        "dataset": set(available_datasets()) | set(available_classification_datasets()),
    }
    return names[key.removesuffix("s")] | EXAMPLES


def comment_lists(text: str) -> list[tuple[str, list[str]]]:
    """``(key, names)`` of each ``|`` list in the comment of a key that selects a plug-in (its continuation lines, indented
    comments, joined; parentheses dropped): the word before the first ``|``, and the first word after each."""
    found, lines = [], text.splitlines()
    for index, line in enumerate(lines):
        keyed = KEYED_COMMENT.match(line)
        if not keyed:
            continue
        comment = keyed.group(3)
        for following in lines[index + 1 :]:
            continued = CONTINUATION.match(following)
            if not continued:
                break
            comment += " " + continued.group(1)
        comment = re.sub(r"\([^)]*\)", "", comment)
        if " | " in comment:
            first, *others = comment.split("|")
            names = re.findall(NAME, first)[-1:] + [re.match(NAME, segment.strip()).group(0) for segment in others if re.match(NAME, segment.strip())]
            found.append((keyed.group(2), names))
    return found


def code_of(page: str) -> str:
    """A page's fenced and inline code, one piece per line."""
    return "\n".join(re.findall(r"```.*?\n(.*?)```", page, re.S) + re.findall(r"`([^`\n]+)`", page))


CONF = sorted((ROOT / "conf").rglob("*.yml"))


@pytest.mark.parametrize("path", CONF, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_name_a_conf_comment_lists_is_registered(path):
    text = path.read_text()
    unknown = [(key, name) for key, names in comment_lists(text) for name in names if name not in registered(key)]
    unknown += [("dataset", name) for name in DATASET_ENTRY.findall(text) if name not in registered("dataset")]
    assert not unknown, f"{path.relative_to(ROOT)} names what no registry holds: {unknown}; `kedro plugins` lists them"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_name_a_page_selects_is_registered(page):
    unknown = [
        (key, name)
        for key, names in SELECTED.findall(code_of(page.read_text()))
        for name in names.split(" | ")
        if name not in registered(key)
    ]
    assert not unknown, f"{page.relative_to(ROOT)} selects what no registry holds: {unknown}; `kedro plugins` lists them"


def test_the_checks_read_the_lists_they_guard():
    conf = (ROOT / "conf/base/parameters_retrieval.yml").read_text()
    assert ("dataset", ["omniglot", "omniglot_validation", "digits", "cub", "cars", "sop", "inshop", "imagefolder", "csv"]) in comment_lists(conf)
    assert SELECTED.findall("see `fractals.family: visual_atom | rcdb`") == [("family", "visual_atom | rcdb")]
    text = "  objective: a  # the one: a (x, as\n     #   y) | b (z)\n     #   | c\nnext: 1  # d | e\n  dataset: a  # a, b\n"
    assert comment_lists(text) == [("objective", ["a", "b", "c"])]
    assert DATASET_ENTRY.findall("- {name: cifar10, root: x}\n- {name: scratch, backbone: y}") == ["cifar10"]
