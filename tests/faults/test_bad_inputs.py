"""Bad inputs stop the run with one message naming the file or key and the fix, and write nothing."""

import pickle

import numpy as np
import pandas as pd
import pytest
import torch
from kedro_datasets.pandas import ParquetDataset
from PIL import Image

from fdsml.catalog import RankAwareDataCatalog, UnreadableArtefactError
from fdsml.config import ConfigError
from fdsml.data import DatasetLayoutError, ImageRecords, read_retrieval_dataset
from fdsml.data.image_records import ImageRecordsDataset, ImageTransform
from fdsml.ifs.finefractaldb import FineFractalDBConfig
from fdsml.families.finefractaldb import generate_finefractaldb
from fdsml.ifs.table_check import CodesTableError, check_codes_table
from fdsml.models import build_model, load_checkpoint_file, model_payload, save_checkpoint
from fdsml.errors import CheckpointError, UserFixableError
from fdsml.models.starting_points import StartingPoint, build_from_start
from fdsml.pipelines.pretrain.nodes import pretrain_model

FRACTALS = {"n_classes": 2, "instances_per_class": 3, "class_filter": {"size": 64, "points": 3000}, "render": {"size": 32, "points": 600}}


@pytest.fixture(scope="module")
def table():
    from fdsml.config import parse

    return generate_finefractaldb(parse(FineFractalDBConfig, FRACTALS, "fractals"))[0]


def edited(table, column, value, row=1):
    copy = table.copy()
    copy.at[row, column] = value
    return copy


def test_a_valid_table_passes(table):
    check_codes_table(table)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: edited(t, "coefficients", [np.nan] + list(t.at[1, "coefficients"])[1:]), "row 1 .* NaN or infinite coefficients"),
        (lambda t: edited(t, "coefficients", [np.inf] + list(t.at[1, "coefficients"])[1:]), "row 1 .* NaN or infinite coefficients"),
        (lambda t: edited(t, "coefficients", [3.0] + list(t.at[1, "coefficients"])[1:]), "row 1 .* not contractive"),
        (lambda t: edited(t, "probabilities", np.full(t.at[1, "n_maps"], 1 / t.at[1, "n_maps"]).tolist()), "row 1 .* do not match \\|det\\|"),
        (lambda t: t.drop(columns="probabilities"), "missing column\\(s\\) probabilities"),
    ],
    ids=["nan", "inf", "non-contractive", "probabilities", "missing-column"],
)
def test_a_hand_edited_table_is_refused_before_pretraining_writes_anything(table, edit, message, tmp_path):
    bad = edit(table)
    if bad.equals(table):
        pytest.skip("the edit did not change the row")
    run_dir = tmp_path / "run"
    pretrain = {"train": {"max_steps": 1, "device": "cpu"}, "run_dir": str(run_dir)}
    with pytest.raises(CodesTableError, match=f"fractal_codes: {message}.*kedro run --pipelines=fractals"):
        pretrain_model(bad, {"materialized": False}, FRACTALS, pretrain)
    assert not run_dir.exists()


def test_the_first_damaged_row_is_named_whatever_is_wrong_with_the_rows_after_it(table):
    """All rows are screened at once; the message names the first row any rule refuses."""
    damage = {
        1: ("coefficients", lambda row: list(row["coefficients"])[:-1], "has \\d+ coefficients and"),
        2: ("coefficients", lambda row: [0.0] * len(row["coefficients"]), "has only singular maps"),
        3: ("probabilities", lambda row: list(np.asarray(row["probabilities"]) + 2e-6), "do not match \\|det\\|"),
        5: ("coefficients", lambda row: [3.0] + list(row["coefficients"])[1:], "is not contractive"),
    }
    bad = table.copy()
    for row, (column, edit, _) in damage.items():
        bad.at[row, column] = edit(bad.loc[row])
    for row, (column, _, message) in damage.items():
        with pytest.raises(CodesTableError, match=f"row {row} .*{message}"):
            check_codes_table(bad)
        bad.at[row, column] = table.at[row, column]
    check_codes_table(bad)


@pytest.mark.parametrize("damage", ["truncated", "garbled"])
def test_an_unreadable_codes_table_names_the_file_and_the_fix(table, tmp_path, damage):
    path = tmp_path / "fractal_codes.parquet"
    table.to_parquet(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else bytes(b ^ 0x5A for b in data))
    catalog = RankAwareDataCatalog({"fractal_codes": ParquetDataset(filepath=str(path))})
    with pytest.raises(UnreadableArtefactError, match="fractal_codes.*fractal_codes.parquet.*truncated or garbled.*delete it"):
        catalog.load("fractal_codes")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("checkpoint") / "model.pt"
    torch.manual_seed(0)
    save_checkpoint(path, model_payload(build_model("resnet18", embedding_dim=8, img_size=32)))
    return path


def test_a_truncated_checkpoint_names_the_file_and_the_fix(checkpoint, tmp_path):
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(checkpoint.read_bytes()[:5000])
    with pytest.raises(CheckpointError, match="truncated.pt: cannot be read, it is truncated or corrupt.*delete it"):
        load_checkpoint_file(truncated)


def test_a_checkpoint_of_another_backbone_is_refused(checkpoint):
    start = StartingPoint(name="fdsml", checkpoint=str(checkpoint), backbone="vit_tiny_patch16_224")
    with pytest.raises(CheckpointError, match="holds a resnet18 backbone, but backbone: vit_tiny_patch16_224"):
        build_from_start(start, seed=0, embedding_dim=8)


class WouldRunCode:
    """Unpickling this creates ``marker``: the proof that code ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickled_payload_is_never_run(tmp_path):
    marker = tmp_path / "code-ran"
    path = tmp_path / "evil.pt"
    torch.save({"format": "fdsml-checkpoint/1", "state_dict": {}, "model": WouldRunCode(marker)}, path)
    with pytest.raises(CheckpointError, match="evil.pt: refused.*could run code"):
        load_checkpoint_file(path)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # the payload is real: a plain unpickle runs it
    assert marker.exists()


def test_a_corrupt_image_stops_the_run_naming_the_file(tmp_path):
    good, bad = tmp_path / "good.png", tmp_path / "bad.jpg"
    Image.new("RGB", (8, 8), "red").save(good)
    Image.new("RGB", (8, 8), "red").save(bad)
    bad.write_bytes(bad.read_bytes()[:40])
    dataset = ImageRecordsDataset(ImageRecords(labels=np.array([0, 1]), paths=(good, bad)), ImageTransform(size=8))
    assert dataset[0]["image"].shape == (3, 8, 8)
    with pytest.raises(DatasetLayoutError, match="bad.jpg: cannot decode this image.*replace it"):
        dataset[1]


def test_a_listed_image_that_is_missing_is_named(tmp_path):
    rows = [(c, k) for c in range(1, 201) for k in range(2)]
    for image_id, (c, k) in enumerate(rows, start=1):
        (tmp_path / "images" / f"{c:03d}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "images" / f"{c:03d}" / f"{k}.jpg").write_bytes(b"")
    (tmp_path / "images.txt").write_text("".join(f"{i} {c:03d}/{k}.jpg\n" for i, (c, k) in enumerate(rows, start=1)))
    (tmp_path / "image_class_labels.txt").write_text("".join(f"{i} {c}\n" for i, (c, _) in enumerate(rows, start=1)))
    (tmp_path / "images/007/1.jpg").unlink()
    with pytest.raises(DatasetLayoutError, match="1 of 400 listed images are missing, e.g. .*007/1.jpg; restore them"):
        read_retrieval_dataset("cub", tmp_path)


def test_every_bad_input_error_is_a_user_error():
    for error in (CodesTableError, CheckpointError, UnreadableArtefactError):
        assert issubclass(error, UserFixableError)
