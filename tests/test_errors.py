"""Mistakes the user can fix end ``kedro run`` with a short answer naming the key or file; real bugs keep their traceback."""

from __future__ import annotations

import pytest
import torch

from fdsml.config import ConfigError
from fdsml.data import DatasetLayoutError
from fdsml.errors import CheckpointError, MissingInputError, UserFixableError, find_user_error
from fdsml.errors import GenerationError

from .fresh_clone import finish, fresh_clone, start


@pytest.mark.parametrize("kind", [ConfigError, DatasetLayoutError, GenerationError, MissingInputError, CheckpointError])
def test_every_project_error_a_user_can_fix_is_one_type(kind):
    assert issubclass(kind, UserFixableError)


def test_the_user_error_is_found_behind_the_errors_kedro_wraps_it_in():
    try:
        try:
            raise ConfigError("fractals.n_classes: must be positive")
        except ConfigError as error:
            raise RuntimeError("Failed while loading data from dataset") from error
    except RuntimeError as wrapped:
        assert str(find_user_error(wrapped)) == "fractals.n_classes: must be positive"
    assert find_user_error(RuntimeError("a real bug")) is None


def _write(path, payload):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(payload, bytes):
        path.write_bytes(payload)
    else:
        torch.save(payload, path)


NO_CLASS_CAN_PASS = (
    "fractals.n_classes=1,fractals.instances_per_class=1,fractals.class_filter.enabled=false,"
    "fractals.min_occupancy=1.0,fractals.max_class_replacements=0,fractals.perturbation.max_attempts=1"
)

MISTAKES = {  # error type: (files to put in the clone first, the command, what the answer must name)
    "ConfigError": ({}, "kedro run --pipelines=fractals --params=fractals.n_classes=-3", "fractals.n_classes"),
    "GenerationError": ({}, f"kedro run --pipelines=fractals --params={NO_CLASS_CAN_PASS}", "fractals.max_class_replacements"),
    "DatasetLayoutError": (
        {"data/06_models/pretrained_model.pt": {"format": "fdsml-checkpoint/1"}},
        "kedro run --pipelines=retrieval --params=retrieval.data.dataset=cub,retrieval.data.root=/nonexistent/CUB_200_2011",
        "/nonexistent/CUB_200_2011",
    ),
    "MissingInputError": ({}, "kedro run --pipelines=validate_descriptor", "data/02_intermediate/fractal_codes.parquet"),
    "CheckpointError": (
        {"data/06_models/pretrained_model.pt": {"weights": torch.zeros(2)}},
        "kedro run --pipelines=classification",
        "data/06_models/pretrained_model.pt",
    ),
}


A_REAL_BUG = ({}, "kedro run --pipelines=fractals", "")
FRACTALS_NODE_START = "    spec = parse_fractals_params(params).spec\n    up_to_date"


def _inject_a_bug(clone):
    """A real bug, not the user's: the clone's fractals node divides by zero before anything else."""
    nodes = clone / "src/fdsml/pipelines/fractals/nodes.py"
    text = nodes.read_text()
    assert FRACTALS_NODE_START in text
    nodes.write_text(text.replace(FRACTALS_NODE_START, "    1 / 0\n" + FRACTALS_NODE_START, 1))


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """Every command of MISTAKES and A_REAL_BUG, each in its own fresh clone, run side by side."""
    started = {}
    for kind, (files, command, _) in {**MISTAKES, "bug": A_REAL_BUG}.items():
        clone = fresh_clone(tmp_path_factory.mktemp(kind))
        for name, payload in files.items():
            _write(clone / name, payload)
        if kind == "bug":
            _inject_a_bug(clone)
        started[kind] = clone, start(command, clone)
    return {kind: (clone, *finish(process)) for kind, (clone, process) in started.items()}


@pytest.mark.slow  # six kedro commands, each in its own fresh clone (the answers fixture)
@pytest.mark.parametrize("kind", sorted(MISTAKES))
def test_a_fixable_mistake_gets_a_few_lines_naming_it(kind, answers):
    clone, code, output = answers[kind]
    named = MISTAKES[kind][2]
    assert code != 0
    assert len(output.strip().splitlines()) <= 10, output
    assert f"{kind}:" in output and named in output, output
    assert "Traceback" not in output
    log = clone / "info.log"
    assert f"(the full traceback is in {log})" in output
    assert "Traceback" in log.read_text() and named in log.read_text()


@pytest.mark.slow  # shares the answers fixture's fresh clones
def test_a_real_bug_still_shows_its_traceback(answers):
    _, code, output = answers["bug"]
    assert code != 0
    assert "Traceback" in output and "ZeroDivisionError" in output and len(output.splitlines()) > 10
