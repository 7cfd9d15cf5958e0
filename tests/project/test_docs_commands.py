"""Every command in the README and ``docs/`` names a pipeline, option and parameter that exist.

Commands are read from fenced and indented code blocks (a ``$ `` prompt stripped, ``\\``
continuations joined, ``#`` comments dropped) and from inline code, then checked by the tool that
runs them: ``kedro run`` by Kedro's own command line (its options), the pipeline registry (the
pipelines), ``conf/`` (the environment) and the merged parameters (each ``--params`` key);
``torchrun`` by torch's launcher and then its ``-m kedro`` command; ``dvc`` by DVC's parser, with
``dvc.yaml``'s stages and each ``-S file:key`` in its file; ``python -m fdsml.plan`` and
``python benchmarks/*.py`` by the options their source declares; ``make`` by the Makefile's targets.
Placeholders (``NAME``, ``<repo>``, ``...``, ``$f``, ``[optional]``) are not checked.
Every link from one page to another names a page and a heading that exist, and docs/benchmarks.md
lists every script of ``benchmarks/`` under its kind, and no other.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path

import pytest
import yaml

from tests.project.pages import PAGES, github_anchor
from tests.support import ROOT

PROGRAMS = ("kedro ", "dvc ", "torchrun ", "python -m fdsml.plan", "python benchmarks/", "make ")
PLACEHOLDER = re.compile(r"\.\.\.|<[^>]*>|\$|^[A-Z_]+$|key=value")


def _lines(text: str) -> list[str]:
    """Candidate command lines of one Markdown page: code blocks and inline code."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            lines.append(line.strip().removeprefix("$ "))
    lines.extend(re.findall(r"`([^`\n]+)`", text))
    joined, carry = [], ""
    for line in lines:
        line = carry + line
        if line.endswith("\\"):
            carry = line[:-1] + " "
            continue
        carry = ""
        joined.append(line)
    return joined


def _commands(text: str) -> list[str]:
    """The commands of one page, one per run program, comments and chains split off."""
    found = []
    for line in _lines(text):
        for part in re.split(r"&&|;", re.sub(r"\s#.*$", "", line)):
            part = part.strip().removeprefix(".venv/bin/")
            if part.startswith(PROGRAMS):
                found.append(part)
    return found


def _all_commands() -> list[tuple[str, str]]:
    return [(page.relative_to(ROOT).as_posix(), command) for page in PAGES for command in _commands(page.read_text())]


@cache
def _pipelines() -> set[str]:
    from kedro.framework.project import pipelines
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(ROOT)
    return set(pipelines)


@cache
def _parameters(env: str | None) -> dict:
    from fdsml.plan import load_parameters

    return load_parameters(env, [], conf_source=ROOT / "conf")


def _has_key(tree: dict, dotted: str) -> bool:
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


def _check_params(overrides: str, env: str | None) -> None:
    for item in overrides.split(","):
        key = item.split("=", 1)[0].strip()
        if "=" not in item or PLACEHOLDER.search(key):
            continue
        assert _has_key(_parameters(env), key), f"--params key {key!r} is not a parameter"


def _check_env(env: str | None) -> None:
    if env is not None and not PLACEHOLDER.search(env):
        assert (ROOT / "conf" / env).is_dir(), f"--env {env}: there is no conf/{env}"


def _check_kedro(args: list[str]) -> None:
    if args[:1] != ["run"]:
        return
    from kedro.framework.cli.project import run

    values = run.make_context("run", args[1:], resilient_parsing=False).params
    _check_env(values.get("env"))
    names = [values.get("pipeline")] if values.get("pipeline") else list(values.get("pipelines") or [])
    for name in ",".join(names).split(","):
        if name and not PLACEHOLDER.search(name):
            assert name in _pipelines(), f"pipeline {name!r} does not exist"
    if values.get("params"):
        overrides = [a.split("=", 1)[1] if a.startswith("--params=") else a for a in args if "=" in a]
        for override in overrides:
            if not override.startswith("--"):
                _check_params(override, values.get("env"))


def _check_torchrun(args: list[str]) -> None:
    from torch.distributed.run import get_args_parser

    module = args.index("-m")
    get_args_parser().parse_args(args[:module] + ["-m", args[module + 1]])
    assert args[module + 1] == "kedro", f"torchrun starts {args[module + 1]!r}, expected kedro"
    _check_kedro(args[module + 2 :])


@cache
def _dvc_stages() -> set[str]:
    return set(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"])


def _check_dvc(args: list[str]) -> None:
    from dvc.cli.parser import get_main_parser

    parsed = get_main_parser().parse_args(args)
    for setting in getattr(parsed, "set_param", None) or []:
        for item in setting if isinstance(setting, list) else [setting]:
            file, _, assignment = item.rpartition(":") if ":" in item.split("=", 1)[0] else ("params.yaml", "", item)
            key = assignment.split("=", 1)[0]
            if PLACEHOLDER.search(key):
                continue
            assert (ROOT / file).is_file(), f"dvc -S names {file}, which does not exist"
            assert _has_key(yaml.safe_load((ROOT / file).read_text()), key), f"dvc -S {key!r} is not in {file}"
    if args[:2] == ["exp", "run"]:
        for target in getattr(parsed, "targets", None) or []:
            assert target in _dvc_stages(), f"dvc exp run {target}: no such stage in dvc.yaml"


def _check_script(path: Path, args: list[str]) -> None:
    assert path.is_file(), f"{path.relative_to(ROOT)} does not exist"
    source = path.read_text()
    for arg in args:
        option = arg.strip("[]").split("=", 1)[0]
        if option.startswith("--"):
            assert f'"{option}"' in source, f"{path.relative_to(ROOT)} has no option {option}"


def _check_plan(args: list[str]) -> None:
    from fdsml.plan import PIPELINES

    _check_script(ROOT / "src/fdsml/plan.py", args)
    values = dict(zip(args, args[1:]))
    _check_env(values.get("--env"))
    for name in values.get("--pipelines", "").strip("[]").split(","):
        assert not name or name in PIPELINES, f"fdsml.plan --pipelines {name}: not a training step"
    if "--params" in values:
        _check_params(values["--params"].strip("[]"), values.get("--env"))


@cache
def _make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE))


def check(command: str) -> None:
    """Fail, naming what is missing, when ``command`` names a pipeline, option or parameter that does not exist."""
    args = [a for a in shlex.split(command) if a not in ("[", "]", "...")]
    program = args[0]
    if program == "kedro":
        _check_kedro(args[1:])
    elif program == "torchrun":
        _check_torchrun(args[1:])
    elif program == "dvc":
        _check_dvc(args[1:])
    elif program == "make":
        targets = {arg for arg in args[1:] if "=" not in arg}  # NAME=value sets a variable
        assert targets <= _make_targets(), f"make {args[1:]}: no such target"
    elif args[:3] == ["python", "-m", "fdsml.plan"]:
        _check_plan(args[3:])
    else:
        _check_script(ROOT / args[1], args[2:])


def test_the_pages_hold_the_commands_they_document():
    commands = [command for _, command in _all_commands()]
    assert "make run" in commands and "make test" in commands
    for program in PROGRAMS:
        assert any(command.startswith(program) for command in commands), f"no {program!r} command found"
    assert len(PAGES) > 10 and len(commands) > 60


def test_the_readme_is_short_and_links_every_reference_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    assert readme.startswith("# ") and readme.index("make run") < readme.index("\n## ")
    unlinked = [page.name for page in PAGES[1:] if f"](docs/{page.name})" not in readme]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


@pytest.mark.parametrize(("page", "command"), _all_commands())
def test_every_documented_command_exists(page, command):
    check(command)


@pytest.mark.parametrize(
    "command",
    [
        "kedro run --pipelines=fractals,no_such_pipeline",
        "kedro run --pipeline=pretrain --env no_such_env",
        "kedro run --pipeline=pretrain --params=pretrain.no_such_key=1",
        "kedro run --pipeline=pretrain --no-such-option",
        "torchrun --standalone --nproc_per_node=8 -m kedro run --pipeline=pretain",
        "dvc exp run -n x -S 'conf/base/parameters_pretrain.yml:pretrain.pa_triplet.no_such=1'",
        "dvc exp run no_such_stage",
        "dvc repr",
        "python -m fdsml.plan --env paper --world-sizes 8",
        "python -m fdsml.plan --pipelines pretrain,fractals",
        "python benchmarks/render_speed.py --no-such-option 3",
        "python benchmarks/no_such_script.py",
        "make no_such_target",
    ],
)
def test_a_wrong_name_is_caught(command):
    from click.exceptions import UsageError
    from dvc.cli import DvcParserError

    with pytest.raises((AssertionError, UsageError, DvcParserError)):
        check(command)



LINK = re.compile(r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)")
BENCHMARK_KINDS = ("Speed and cost", "Studies", "The GPU check")


def headings(text: str) -> set[str]:
    """The anchors of a Markdown page's headings (outside fenced code)."""
    found, fenced = set(), False
    for line in text.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#"):
            found.add(github_anchor(line.lstrip("#")))
    return found


def broken_links(page: Path) -> list[str]:
    """``target#anchor: why`` for every relative link of ``page`` whose page or heading does not exist."""
    problems = []
    for target, anchor in LINK.findall(page.read_text()):
        linked = page.parent / target if target else page
        if not linked.is_file():
            problems.append(f"{target}: no such page")
        elif anchor and anchor not in headings(linked.read_text()):
            problems.append(f"{target}#{anchor}: no such heading")
    return problems


def test_every_link_between_pages_names_a_page_and_heading_that_exist():
    pages = [*PAGES, ROOT / "conf" / "README.md"]
    problems = [f"{page.relative_to(ROOT)} -> {problem}" for page in pages for problem in broken_links(page)]
    assert not problems, "\n".join(problems)


def test_a_broken_link_is_caught(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#a-section) [b](other.md#not-a-heading) [c](gone.md) [d](#page) [e](#nowhere)\n\n# Page\n")
    assert broken_links(page) == ["other.md#not-a-heading: no such heading", "gone.md: no such page", "#nowhere: no such heading"]


def benchmark_rows(page: str) -> dict[str, str]:
    """``{script: kind}`` for each table row of docs/benchmarks.md: the script its first cell names, the kind its section's heading."""
    rows, kind = {}, None
    for line in page.splitlines():
        if line.startswith("## "):
            kind = line.removeprefix("## ").strip()
        elif line.startswith("| `") and kind is not None:
            script = re.search(r"benchmarks/(\w+)\.py", line.split("|")[1])
            if script:
                rows.setdefault(script.group(1), kind)
    return rows


def test_the_benchmarks_page_lists_every_script_under_its_kind():
    rows = benchmark_rows((ROOT / "docs" / "benchmarks.md").read_text())
    scripts = {path.stem for path in (ROOT / "benchmarks").glob("*.py")}
    assert sorted(scripts - set(rows)) == [], "scripts of benchmarks/ that docs/benchmarks.md does not list"
    assert sorted(set(rows) - scripts) == [], "docs/benchmarks.md lists scripts that benchmarks/ does not have"
    assert {script: kind for script, kind in rows.items() if kind not in BENCHMARK_KINDS} == {}, f"kinds are {BENCHMARK_KINDS}"


def test_a_missing_or_unclassed_script_is_caught():
    page = "# Benchmarks\n\n| `python benchmarks/a.py` | x | y |\n\n## Checks\n\n| `python benchmarks/b.py --quick` | x | y |\n| `python benchmarks/b.py` (again) | x | y |\n\n## Other\n\n| `python benchmarks/c.py` | x | y |\n"
    assert benchmark_rows(page) == {"b": "Checks", "c": "Other"}
