"""Mistakes a new user makes, caught before any work: from the command line, in a fresh copy of the
project, each stops `kedro run` / `kedro check` with one message naming the key or file and the fix, and
nothing is trained first."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.fresh_clone import fresh_clone, run
from tests.own_images import tiny_sop, write_csv_listing
from tests.tuning.study_files import TINY_STUDY


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def _assert_one_message(code: int, output: str, *expected: str) -> str:
    """Exit 1 with the message and the log file's line, nothing else (no traceback)."""
    lines = _lines(output)
    assert code == 1 and len(lines) == 2 and lines[1].startswith("(the full traceback is in"), output[-3000:]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def _environment(clone: Path, name: str, files: dict[str, str]) -> str:
    """A conf/<name> folder of parameter files in the clone, as a user writes conf/local."""
    folder = clone / "conf" / name
    folder.mkdir()
    for file, text in files.items():
        (folder / file).write_text(text)
    return name


@pytest.mark.slow  # a kedro run in a child process; tests/pipelines/test_run_checks.py checks the same key in process
def test_a_misspelt_section_on_the_command_line_stops_the_run_naming_the_key(tmp_path):
    clone = fresh_clone(tmp_path)
    code, output = run("kedro run --pipelines=pretrain --params=pretan.train.max_steps=6", clone)
    _assert_one_message(code, output, "ConfigError: pretan: unknown parameter section; did you mean pretrain.train.max_steps?")
    assert not (clone / "data" / "02_intermediate" / "fractal_codes.parquet").exists()


@pytest.mark.slow
def test_a_misspelt_key_deep_in_a_conf_file_of_a_section_the_run_does_not_read_stops_it(tmp_path):
    clone = fresh_clone(tmp_path)
    env = _environment(clone, "mine", {"parameters_retrieval.yml": "retrieval:\n  data:\n    kss: [1, 2]\n"})
    code, output = run(f"kedro run --pipelines=fractals --env {env}", clone)
    _assert_one_message(code, output, "retrieval.data: unknown key(s) kss (did you mean retrieval.data.ks?)")
    assert not (clone / "data" / "02_intermediate" / "fractal_codes.parquet").exists()


@pytest.mark.slow
def test_a_gallery_smaller_than_recall_at_k_is_refused_before_fine_tuning(tmp_path):
    clone, sop = fresh_clone(tmp_path / "clone"), tiny_sop(tmp_path / "sop")
    code, output = run(f"kedro run --pipelines=retrieval --params=retrieval.data.dataset=sop,retrieval.data.root={sop}", clone)
    message = _assert_one_message(code, output, "ConfigError: retrieval.data.ks: [1, 10, 100] (null: sop's own list)")
    assert "asks for Recall@100, but a query of sop searches 5 items" in message
    assert "`retrieval: {data: {ks: [1]}}` in conf/local/parameters_retrieval.yml" in message
    assert not (clone / "data" / "06_models" / "retrieval_runs").exists()


@pytest.mark.slow
def test_a_checkpoint_of_another_backbone_is_refused_before_scratch_is_fine_tuned(tmp_path):
    from fdsml.models import model_payload
    from fdsml.models.checkpoint import save_checkpoint
    from fdsml.models.network import build_model

    clone = fresh_clone(tmp_path)
    save_checkpoint(clone / "data/06_models/pretrained_model.pt", model_payload(build_model("vit_tiny_patch4", img_size=32)))
    code, output = run("kedro run --pipelines=retrieval", clone)
    _assert_one_message(
        code, output, "CheckpointError: starting point 'fdsml': data/06_models/pretrained_model.pt holds a vit_tiny_patch4 "
        "backbone, but backbone: resnet18 was asked for"
    )
    assert not (clone / "data" / "06_models" / "retrieval_runs").exists()


@pytest.mark.slow
def test_kedro_check_names_an_image_that_does_not_decode_then_passes_once_it_is_replaced(tmp_path):
    clone, sop = fresh_clone(tmp_path / "clone"), tiny_sop(tmp_path / "sop")
    good = (sop / "images/4_2.png").read_bytes()
    (sop / "images/4_2.png").write_bytes(good[: len(good) // 2])  # truncated, as an interrupted copy leaves it
    params = f"retrieval:\n  data:\n    dataset: sop\n    root: {sop}\n    ks: [1, 2]\n    batch_size: 3\n"
    env = _environment(clone, "mine", {"parameters_retrieval.yml": params})
    command = f"kedro check --env {env} --pipelines=fractals,pretrain,retrieval"
    code, output = run(command, clone)
    _assert_one_message(code, output, "DatasetLayoutError: sop: 1 of 12 listed images do not decode", f"{sop}/images/4_2.png")
    (sop / "images/4_2.png").write_bytes(good)
    code, output = run(command, clone)
    assert code == 0 and "nothing wrong found" in output, output[-3000:]
    assert len((clone / "data/02_intermediate/decoded_images.txt").read_text().splitlines()) == 12


@pytest.mark.slow
def test_a_misspelt_model_override_or_loss_option_stops_the_run_in_one_line_before_any_work(tmp_path):
    clone = fresh_clone(tmp_path)
    code, output = run("kedro run --pipelines=pretrain --params=pretrain.model.overrides.drop_path_rat=0.1", clone)
    _assert_one_message(
        code, output, "ConfigError: pretrain.model.overrides.drop_path_rat: timm's resnet18 (ResNet) takes no argument "
        "drop_path_rat (did you mean drop_path_rate?)"
    )
    assert not (clone / "data" / "02_intermediate" / "fractal_codes.parquet").exists()
    code, output = run("kedro check --pipelines=retrieval --params=retrieval.loss.options.margn=0.2", clone)
    _assert_one_message(code, output, "ConfigError: retrieval.loss.options.margn: the proxy loss proxy_anchor (ProxyAnchorLoss) takes no argument margn (did you mean margin?)")


@pytest.mark.slow
def test_a_csv_listing_its_images_twice_or_a_copied_test_image_stops_kedro_check(tmp_path):
    clone = fresh_clone(tmp_path / "clone")
    listing = write_csv_listing(tmp_path / "data" / "birds.csv", classes=4, per_class=3)
    header, *rows = listing.read_text().splitlines()
    params = f"retrieval:\n  data:\n    dataset: csv\n    root: {listing}\n    ks: [1, 2]\n    batch_size: 6\n"
    env = _environment(clone, "mine", {"parameters_retrieval.yml": params})
    command = f"kedro check --env {env} --pipelines=retrieval"
    listing.write_text("\n".join([header, *rows, *rows]) + "\n")  # two exports merged
    code, output = run(command, clone)
    _assert_one_message(code, output, "DatasetLayoutError: ", "birds.csv: images listed more than once (12: lines 2 and 14: images/0_0.png")
    (tmp_path / "data" / "images" / "3_0.png").write_bytes((tmp_path / "data" / "images" / "2_1.png").read_bytes())
    listing.write_text("\n".join([header, *rows]) + "\n")  # each line once, but 3_0.png is 2_1.png under another name
    code, output = run(command, clone)
    _assert_one_message(code, output, "csv-birds: pixel-identical copies among the scored images or of a training image (1: test 2_1.png = test 3_0.png)")


@pytest.mark.slow  # a kedro study run in a child process
def test_a_study_name_that_leaves_conf_studies_is_refused_before_its_file_is_read(tmp_path):
    clone = fresh_clone(tmp_path / "clone")
    (tmp_path / "outside.yml").write_text(yaml.safe_dump(TINY_STUDY))  # a valid study file, outside the project
    code, output = run("kedro check --pipelines=study --params=study.name=../../../outside", clone)
    _assert_one_message(code, output, "study.name: '../../../outside' names files and folders and must stay inside their folder")
