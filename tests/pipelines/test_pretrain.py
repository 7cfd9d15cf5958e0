"""The pretrain pipeline end to end on a tiny configuration, through a real catalog."""

import numpy as np
import pandas as pd
import pytest
import torch
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner

from fdsml.config import ConfigError
from fdsml.models import load_checkpoint
from fdsml.pipelines.pretrain import create_pipeline

from .catalogs import pretrain_datasets
from tests.support import SHARDED_FRACTALS, SHARDED_PRETRAIN


def test_pipeline_trains_from_materialised_shards_and_saves_a_loadable_model(tmp_path):
    """On the training rows of the shards; the held-out instances are validated at initialisation and at steps 2 and 3."""
    catalog = DataCatalog(pretrain_datasets(tmp_path, SHARDED_FRACTALS, SHARDED_PRETRAIN))
    SequentialRunner().run(create_pipeline(), catalog)
    history = pd.read_csv(tmp_path / "history.csv")
    assert history["step"].tolist() == [0, 1, 2, 3] and history["loss"].notna().tolist() == [False, True, True, True]
    assert history["val_unseen_agreement_all"].notna().tolist() == [True, False, True, True]
    model, payload = load_checkpoint(tmp_path / "model.pt")
    assert payload["metadata"]["filter"] == "each" and payload["metadata"]["steps"] == 3
    assert model(torch.rand(2, 3, 32, 32)).shape == (2, 8)


def test_the_summary_gives_what_the_objective_trains_for_before_and_after_with_its_noise(tmp_path, caplog):
    """PA-Triplet `all` trains the held-out `all` agreement: the run's last word says how it moved, against its noise."""
    every = SHARDED_PRETRAIN | {"pa_triplet": {"filter": "all"}}
    with caplog.at_level("INFO"):
        SequentialRunner().run(create_pipeline(), DataCatalog(pretrain_datasets(tmp_path, SHARDED_FRACTALS, every)))
    history = pd.read_csv(tmp_path / "history.csv")
    (before, before_se), (after, after_se) = history[["val_unseen_agreement_all", "se_val_unseen_agreement_all"]].iloc[[0, -1]].to_numpy()
    assert before_se == pytest.approx(np.sqrt(before * (1 - before) / 20))  # binomial over the 20 held-out triplets
    change, se = after - before, np.hypot(before_se, after_se)
    said = (
        f"Held-out unseen_agreement_all, what pa_triplet trains for: {before:.4f} ± {before_se:.4f} at step 0 -> "
        f"{after:.4f} ± {after_se:.4f} at step 3: {change:+.4f} ± {se:.4f} ({abs(change) / se:.1f} standard errors)"
    )
    assert said in caplog.text


def _edit_one_descriptor(codes_file) -> None:
    """Change row 0's descriptor in the stored table, as a hand edit between two runs would."""
    table = pd.read_parquet(codes_file)
    table.at[0, "psi"] = [value * 0.9 for value in table.at[0, "psi"]]
    table.to_parquet(codes_file)


def test_a_run_started_at_pre_training_names_the_table_it_reads_not_the_digest_its_summary_recorded(tmp_path):
    """With the summary's stale digest the second run would resume the first one's folder, trained on the old table."""
    quick = SHARDED_PRETRAIN | {"data": SHARDED_PRETRAIN["data"] | {"source": "render"}, "train": SHARDED_PRETRAIN["train"] | {"max_steps": 1}, "validation": {"every": 0}}
    SequentialRunner().run(create_pipeline(), DataCatalog(pretrain_datasets(tmp_path, SHARDED_FRACTALS, quick)))
    _edit_one_descriptor(tmp_path / "codes.parquet")
    SequentialRunner().run(create_pipeline().from_nodes("pretrain_model_node"), DataCatalog(pretrain_datasets(tmp_path, SHARDED_FRACTALS, quick)))
    assert len([folder for folder in (tmp_path / "run").iterdir() if folder.is_dir()]) == 2


def test_shards_rendered_from_another_table_are_refused_with_the_fix(tmp_path):
    quick = SHARDED_PRETRAIN | {"train": SHARDED_PRETRAIN["train"] | {"max_steps": 1}, "validation": {"every": 0}}
    SequentialRunner().run(create_pipeline(), DataCatalog(pretrain_datasets(tmp_path, SHARDED_FRACTALS, quick)))
    _edit_one_descriptor(tmp_path / "codes.parquet")
    with pytest.raises(ConfigError, match=r"fractal_images: .* another codes table .*kedro run --pipelines=fractals"):
        SequentialRunner().run(create_pipeline().from_nodes("pretrain_model_node"), DataCatalog(pretrain_datasets(tmp_path, SHARDED_FRACTALS, quick)))


def test_a_vision_transformer_of_timm_pretrains_with_adamw_and_says_so_before_training(tmp_path, caplog):
    vit = SHARDED_PRETRAIN | {"model": {"backbone": "deit_tiny_patch16_224", "embedding_dim": 8, "overrides": {"patch_size": 8, "depth": 1}}}
    with caplog.at_level("INFO"):
        SequentialRunner().run(create_pipeline(), DataCatalog(pretrain_datasets(tmp_path, SHARDED_FRACTALS, vit)))
    # 3 classes x 2 instances: lr = 5e-4 x 6 / 512
    said = "Optimizer adamw, lr 5.86e-06 (base_lr 0.0005 x global batch 6 / 512), warmup_cosine: pretrain.transformer_optimizer, as deit_tiny_patch16_224 is a transformer"
    assert said in caplog.text and caplog.text.index(said) < caplog.text.index("Training on")
    _, payload = load_checkpoint(tmp_path / "model.pt")
    assert payload["metadata"]["recipe"]["optimizer"]["name"] == "adamw" and payload["model"]["img_size"] == 32
    assert payload["metadata"]["recipe"]["learning_rate"] == pytest.approx(5e-4 * 6 / 512)
