"""The export pipeline after a real pre-training: the model card tells how the model was trained."""

import torch
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner

from fdsml.catalog_datasets import OptionalDataset, TimmFolderDataset
from fdsml.models import load_checkpoint
from fdsml.pipelines.export import create_pipeline as export_pipeline
from fdsml.pipelines.pretrain import create_pipeline as pretrain_pipeline

from .catalogs import pretrain_datasets
from tests.support import SHARDED_FRACTALS, SHARDED_PRETRAIN


def test_the_card_shows_the_recipe_the_checkpoint_trained_with_not_todays_configuration(tmp_path):
    trained = SHARDED_PRETRAIN | {"optimizer": {"name": "sgd", "base_lr": 0.512, "reference_batch": 256}}
    catalog = DataCatalog(
        pretrain_datasets(tmp_path, SHARDED_FRACTALS, trained)
        | {
            "params:export": MemoryDataset({"name": "tiny"}),
            "retrieval_table_if_any": OptionalDataset({"type": "text.TextDataset", "filepath": str(tmp_path / "none.md")}),
            "retrieval_metrics_if_any": OptionalDataset({"type": "json.JSONDataset", "filepath": str(tmp_path / "none.json")}),
            "exported_backbone": TimmFolderDataset(str(tmp_path / "exported")),
        }
    )
    SequentialRunner().run(pretrain_pipeline(), catalog)
    # today's configuration says another rate: the export pipeline does not read it
    catalog["params:pretrain"] = MemoryDataset(SHARDED_PRETRAIN | {"optimizer": {"base_lr": 1.31}})
    SequentialRunner().run(export_pipeline(), catalog)
    card = (tmp_path / "exported/README.md").read_text()
    # 3 classes x 2 instances = 6 images a step: lr 0.512 x 6 / 256 = 0.012
    assert "| optimizer | sgd, base lr 0.512 (per 256 images): lr 0.012, weight decay" in card
    assert "1.31" not in card and "nan" not in card
    assert "| batch | 3 classes x 2 instances per replica, 1 replica(s): 6 images |" in card
    assert "| steps | 3 |" in card and "over 3 steps" in card  # the step-0 validation row has no loss
    assert "FineFractalDB" in card and "3 x 6 (seed 2)" in card  # the data the checkpoint was trained on


def test_any_timm_backbone_pretrains_and_exports_a_folder_timm_loads(tmp_path):
    convnext = SHARDED_PRETRAIN | {"model": {"backbone": "convnext_atto", "embedding_dim": 8}}
    catalog = DataCatalog(
        pretrain_datasets(tmp_path, SHARDED_FRACTALS, convnext)
        | {
            "params:export": MemoryDataset({}),
            "retrieval_table_if_any": OptionalDataset({"type": "text.TextDataset", "filepath": str(tmp_path / "none.md")}),
            "retrieval_metrics_if_any": OptionalDataset({"type": "json.JSONDataset", "filepath": str(tmp_path / "none.json")}),
            "exported_backbone": TimmFolderDataset(str(tmp_path / "exported")),
        }
    )
    SequentialRunner().run(pretrain_pipeline() + export_pipeline(), catalog)
    model, _ = load_checkpoint(tmp_path / "model.pt")
    exported = catalog.load("exported_backbone")
    images = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(exported(model.normalise(images)), model.features(images))
    assert exported.num_features == 320 and "| optimizer | sgd," in (tmp_path / "exported/README.md").read_text()


def test_exported_after_pre_training_again_the_card_leaves_out_the_retrieval_numbers_of_the_earlier_model(tmp_path):
    """RCDB pre-trained and exported without re-running retrieval: the table on disk fine-tuned an earlier checkpoint."""
    import json

    import pandas as pd

    from fdsml.models import build_model, model_payload
    from fdsml.models.starting_points import PRETRAINED, start_record

    torch.manual_seed(0)
    earlier = model_payload(build_model("resnet18", embedding_dim=8, img_size=32), objective="pa_triplet")
    torch.manual_seed(1)
    now = model_payload(build_model("resnet18", embedding_dim=8, img_size=32), objective="pa_triplet")
    (tmp_path / "table.md").write_text("Retrieval on `omniglot`:\n\n| start | recall@1 |\n|---|---|\n| fdsml | 61.0 ± 0.0 |\n")
    metrics = {"scratch": start_record(None, None), "fdsml": start_record(PRETRAINED, earlier) | {"dataset": "omniglot"}}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))

    def card_of(pretrained: dict) -> str:
        catalog = DataCatalog(
            {
                "pretrained_model": MemoryDataset(pretrained, copy_mode="assign"),
                "pretrain_history": MemoryDataset(pd.DataFrame({"step": [1, 2], "loss": [0.9, 0.5], "lr": [0.1, 0.1]})),
                "params:export": MemoryDataset({}),
                "retrieval_table_if_any": OptionalDataset({"type": "text.TextDataset", "filepath": str(tmp_path / "table.md")}),
                "retrieval_metrics_if_any": OptionalDataset({"type": "json.JSONDataset", "filepath": str(tmp_path / "metrics.json")}),
                "exported_backbone": TimmFolderDataset(str(tmp_path / "exported")),
            }
        )
        SequentialRunner().run(export_pipeline(), catalog)
        return (tmp_path / "exported/README.md").read_text()

    stale = card_of(now)
    assert "61.0" not in stale and "Not run for this checkpoint" in stale and "`kedro run --pipelines=retrieval`" in stale
    assert "| fdsml | 61.0 ± 0.0 |" in card_of(earlier)
