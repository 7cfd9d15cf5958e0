"""The retrieval pipeline end to end on a tiny configuration, from scratch and from a checkpoint."""

import json

import pytest
import torch
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from kedro_datasets.matplotlib import MatplotlibDataset
from kedro_datasets.pandas import CSVDataset
from kedro_datasets.text import TextDataset

from fdsml.catalog_datasets import CheckpointDataset
from fdsml.models import build_model, load_checkpoint_file, model_payload
from fdsml.models.starting_points import trunk_digest
from fdsml.pipelines.retrieval import create_pipeline

from ..own_images import write_image_folder
from ..support import TINY_RETRIEVAL

TINY = TINY_RETRIEVAL | {"n_example_queries": 2}


@pytest.fixture(scope="module")
def pretrained():
    torch.manual_seed(123)  # a trunk unlike the scratch start's seed-0 initialisation
    return model_payload(build_model("resnet18", embedding_dim=4, img_size=16), objective="pa_triplet")


def _catalog(folder, params, pretrained):
    return DataCatalog(
        {
            "pretrained_model": MemoryDataset(pretrained, copy_mode="assign"),
            "params:retrieval": MemoryDataset(params | {"run_dir": str(folder / "runs")}),
            "retrieval_metrics": JSONDataset(filepath=str(folder / "metrics.json")),
            "retrieval_table": TextDataset(filepath=str(folder / "table.md")),
            "retrieval_history": CSVDataset(filepath=str(folder / "history.csv")),
            "retrieval_models": CheckpointDataset(filepath=str(folder / "models.pt")),
            "retrieval_examples": MatplotlibDataset(filepath=str(folder / "examples.png")),
        }
    )


def test_scratch_and_checkpoint_starts_are_compared_side_by_side(tmp_path, pretrained):
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, TINY, pretrained))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert list(metrics) == ["scratch", "fdsml"]
    for result in metrics.values():
        assert set(result["mean"]) == {"recall@1", "recall@2", "recall@4", "recall@8", "map@r", "r_precision", "nmi"}
        assert all(0 <= value <= 1 for value in result["mean"].values())
    # which trunk each row began from, by content: the model card and the report show them beside that model only
    assert {start: (r["checkpoint"], r["trunk_digest"]) for start, r in metrics.items()} == {
        "scratch": (None, ""), "fdsml": ("pretrained_model", trunk_digest(pretrained))
    }
    table = (tmp_path / "table.md").read_text()
    assert "| scratch |" in table and "| fdsml |" in table
    models = load_checkpoint_file(tmp_path / "models.pt")["models"]
    # two short steps leave each trunk next to where it started: the fdsml start began from the checkpoint
    start = pretrained["state_dict"]["backbone.conv1.weight"]
    fdsml, scratch = (models[name]["state_dict"]["backbone.conv1.weight"] for name in ("fdsml", "scratch"))
    assert (fdsml - start).abs().max() < 0.01 < (scratch - start).abs().max()
    assert (tmp_path / "examples.png").stat().st_size > 0


def test_a_checkpoint_of_another_backbone_fails_clearly(tmp_path, pretrained):
    params = TINY | {"starts": [{"name": "fdsml", "checkpoint": "pretrained_model", "backbone": "resnet50"}]}
    with pytest.raises(ValueError, match="holds a resnet18 backbone, but backbone: resnet50 was asked for"):
        SequentialRunner().run(create_pipeline(), _catalog(tmp_path, params, pretrained))


def test_couce_fine_tuning_saves_a_plain_model(tmp_path, pretrained):
    params = TINY | {"starts": [{"name": "scratch", "backbone": "resnet18"}], "couce": {"dictionary_size": 16}}
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, params, pretrained))
    payload = load_checkpoint_file(tmp_path / "models.pt")["models"]["scratch"]
    plain = build_model(**payload["model"])
    assert set(plain.state_dict()) == set(payload["state_dict"])


def test_a_finished_run_is_reused_only_while_the_pretrained_weights_are_the_same(tmp_path, pretrained, caplog):
    """After pre-training changes, fine-tuning starts over from the new weights instead of returning the old model."""
    params = TINY | {"starts": [{"name": "fdsml", "checkpoint": "pretrained_model", "backbone": "resnet18"}]}
    torch.manual_seed(7)
    other = model_payload(build_model("resnet18", embedding_dim=4, img_size=16), objective="pa_triplet")

    def trunk_after(payload):
        SequentialRunner().run(create_pipeline(), _catalog(tmp_path, params, payload))
        return load_checkpoint_file(tmp_path / "models.pt")["models"]["fdsml"]["state_dict"]["backbone.conv1.weight"]

    first = trunk_after(pretrained)
    with caplog.at_level("INFO", logger="fdsml.training.loop"):
        again = trunk_after(pretrained)
    assert "at step 2 of 2" in caplog.text and torch.equal(first, again)  # reused: nothing trained
    changed = trunk_after(other)
    start = other["state_dict"]["backbone.conv1.weight"]
    assert not torch.equal(changed, first) and (changed - start).abs().max() < 0.01


def test_two_datasets_runs_live_side_by_side_and_a_rerun_of_the_first_reuses_it(tmp_path, pretrained, caplog):
    scratch = {"starts": [{"name": "scratch", "backbone": "resnet18"}]}
    folder = write_image_folder(tmp_path / "birds", classes=4, per_class=5)
    own = TINY | scratch | {"data": TINY["data"] | {"dataset": "imagefolder", "root": str(folder), "batch_size": 8}}
    digits = TINY | scratch
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, digits, pretrained))
    first = json.loads((tmp_path / "metrics.json").read_text())
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, own, pretrained))
    mine = json.loads((tmp_path / "metrics.json").read_text())
    assert first["scratch"]["dataset"] == "digits" and mine["scratch"]["dataset"] == "imagefolder-birds"
    assert (tmp_path / "table.md").read_text().startswith("Retrieval on `imagefolder-birds`:")
    checkpoints = {path.relative_to(tmp_path / "runs").as_posix() for path in (tmp_path / "runs").rglob("last.pt")}
    assert checkpoints == {"digits/scratch_seed0/last.pt", "imagefolder-birds/scratch_seed0/last.pt"}
    caplog.clear()
    with caplog.at_level("INFO"):
        SequentialRunner().run(create_pipeline(), _catalog(tmp_path, digits, pretrained))
    assert "holds the finished run (2 steps): nothing to train" in caplog.text and "starting over" not in caplog.text
    assert json.loads((tmp_path / "metrics.json").read_text()) == first


def test_any_timm_backbone_fine_tunes_from_scratch(tmp_path, pretrained):
    convnext = TINY | {"starts": [{"name": "convnext", "backbone": "convnext_atto"}], "data": TINY["data"] | {"image_size": 32}}
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, convnext, pretrained))
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert 0 <= metrics["convnext"]["mean"]["recall@1"] <= 1
    payload = load_checkpoint_file(tmp_path / "models.pt")["models"]["convnext"]
    assert payload["model"]["name"] == "convnext_atto" and payload["state_dict"]["head.weight"].shape == (8, 320)


def test_the_same_images_as_class_folders_and_as_a_shuffled_csv_give_the_same_numbers(tmp_path, pretrained):
    folder = write_image_folder(tmp_path / "birds", classes=4, per_class=5)
    rows = [f"{image.relative_to(tmp_path)},{image.parent.name}" for image in sorted(folder.rglob("*.png"))]
    rows = rows[1::2] + rows[::2]  # another order, as a script walking the folders may write it
    (tmp_path / "birds.csv").write_text("path,label\n" + "\n".join(rows) + "\n")
    scores, trunks = [], []
    for dataset, root in (("imagefolder", folder), ("csv", tmp_path / "birds.csv")):
        data = TINY["data"] | {"dataset": dataset, "root": str(root), "batch_size": 8, "ks": [1, 2]}
        SequentialRunner().run(create_pipeline(), _catalog(tmp_path, TINY | {"starts": TINY["starts"][:1], "data": data}, pretrained))
        scores.append(json.loads((tmp_path / "metrics.json").read_text())["scratch"]["mean"])
        trunks.append(load_checkpoint_file(tmp_path / "models.pt")["models"]["scratch"]["state_dict"])
    assert scores[0] == scores[1]
    assert all(torch.equal(trunks[0][name], trunks[1][name]) for name in trunks[0])  # the same batches trained the same weights


def test_a_test_class_of_one_image_is_counted_as_left_out_in_the_metrics_and_the_table(tmp_path, pretrained):
    folder = write_image_folder(tmp_path / "birds", classes=4, per_class=3)
    for image in sorted((folder / "class_03").iterdir())[1:]:
        image.unlink()  # class_03, a test class, keeps one image: its query has nothing to find
    data = TINY["data"] | {"dataset": "imagefolder", "root": str(folder), "batch_size": 6, "ks": [1, 2]}
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, TINY | {"starts": TINY["starts"][:1], "data": data}, pretrained))
    assert json.loads((tmp_path / "metrics.json").read_text())["scratch"]["queries_left_out"] == 1
    assert "Queries with no other image of their class to find, left out of Recall@K, MAP@R and R-Precision: 1." in (tmp_path / "table.md").read_text()
