"""The one reuse policy: every defining key, input artefact, code change and world size changes a
step's fingerprint; the declared non-defining keys do not.

The keys are enumerated from each step's configuration dataclass, not from a hand-kept list, so a
field added tomorrow is covered the day it is added.
"""

import copy
import dataclasses
import hashlib

import numpy as np
import pandas as pd
import pytest
import torch

from fdsml import fingerprints
from fdsml.families.finefractaldb import FINEFRACTALDB, generate_finefractaldb
from fdsml.families.generation import is_up_to_date
from fdsml.ifs.finefractaldb import FineFractalDBConfig
from fdsml.data import ImageRecords
from fdsml.data.classification_datasets import classification_reader_module
from fdsml.evaluation import robustness
from fdsml.models.starting_points import StartingPoint
from fdsml.training import classification, finetune, pretrain, retrieval
from fdsml.training.pretrain_objectives import known_objectives
from fdsml.training.run_folders import run_fingerprint
from fdsml.distributed import DistContext
from tests.support import FINGERPRINT_FRACTALS, FINGERPRINT_SPEC, pretrain_fingerprint

fractals_fingerprint = FINEFRACTALDB.fingerprint
CPU = DistContext(torch.device("cpu"))


def retrieval_fingerprint(config, start, seed, start_weights, context, training_images):
    config = finetune.at_start_rate(config, start)  # a start's own rate, as the comparison fine-tunes it
    task, run = retrieval.fine_tuning(config, n_classes=2), retrieval.finetune_run(config.data.dataset, start, seed)
    return run_fingerprint(finetune.defining_run(task, run, start_weights, training_images), config.train, context)


def classification_fingerprint(config, dataset, start, start_weights, context, training_images):
    reader = (classification_reader_module(dataset.name),)
    task, run = classification.fine_tuning(config, dataset.name, 2, reader), classification.finetune_run(config, dataset.name, start, dataset)
    return run_fingerprint(finetune.defining_run(task, run, start_weights, training_images), config.train, context)


def leaves(config, prefix=()):
    """(path, defining) of every leaf field of a configuration dataclass, at any depth."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        defining = fingerprints.field_defines(field, config)
        if dataclasses.is_dataclass(value) and defining:
            yield from leaves(value, (*prefix, field.name))
        else:
            yield (*prefix, field.name), defining


OTHER_VALUES = {("objective",): "fdsl", ("data", "dataset"): "digits", ("train", "bf16_parts"): ("trunk",)}
"""A changed value a fingerprint can still be computed for (a registered name, not any string)."""


def flipped(config, path):
    """A copy of ``config`` with the leaf at ``path`` changed (validation bypassed: only the fingerprint reads it)."""
    config = copy.deepcopy(config)
    parent = config
    for name in path[:-1]:
        parent = getattr(parent, name)
    value = getattr(parent, path[-1])
    if path in OTHER_VALUES:
        new = OTHER_VALUES[path]
    elif isinstance(value, bool):
        new = not value
    elif isinstance(value, (int, float)):
        new = value + 1
    elif isinstance(value, str):
        new = value + "-changed"
    elif isinstance(value, (tuple, list)):
        new = (*value, "changed")
    elif isinstance(value, dict):
        new = {**value, "changed": 1}
    else:
        new = "changed"
    object.__setattr__(parent, path[-1], new)
    return config


def check_every_key(config, fingerprint_of):
    base = fingerprint_of(config)
    redone, reused = [], []
    for path, defining in leaves(config):
        changed = fingerprint_of(flipped(config, path)) != base
        if changed != defining:
            (redone if changed else reused).append(".".join(path))
    assert not reused, f"defining keys that do not change the fingerprint (stale reuse): {reused}"
    assert not redone, f"non-defining keys that change the fingerprint (needless rework): {redone}"


def test_every_key_of_the_codes_table_definition(fingerprint_table):
    check_every_key(FineFractalDBConfig(), fractals_fingerprint)


def test_every_key_of_a_pretraining_run(fingerprint_table):
    check_every_key(pretrain.PretrainConfig(), lambda config: pretrain_fingerprint(config, fingerprint_table))


def test_a_transformers_optimizer_defines_its_run_through_the_optimizer_it_replaces(fingerprint_table):
    vit = pretrain.parse_pretrain_params({"model": {"backbone": "vit_tiny_patch4"}})
    slower = pretrain.parse_pretrain_params({"model": {"backbone": "vit_tiny_patch4"}, "transformer_optimizer": {"name": "adamw", "base_lr": 1e-5}})
    assert vit.optimizer == vit.transformer_optimizer and slower.optimizer.base_lr == 1e-5
    assert pretrain_fingerprint(vit, fingerprint_table) != pretrain_fingerprint(slower, fingerprint_table)


def test_every_key_of_a_retrieval_run():
    start = StartingPoint("fdsml", "pretrained_model")
    check_every_key(retrieval.RetrievalConfig(), lambda config: retrieval_fingerprint(config, start, 0, "w", CPU, "images"))


def test_every_key_of_a_classification_run():
    dataset, start = classification.DatasetSettings(), StartingPoint("fdsml", "pretrained_model")
    check_every_key(
        classification.ClassificationConfig(),
        lambda config: classification_fingerprint(config, dataset, start, "w", CPU, "images"),
    )


def test_every_key_and_the_clean_images_of_the_corrupted_test_set():
    images = np.random.default_rng(0).integers(0, 256, size=(4, 32, 32, 3), dtype=np.uint8)
    clean = ImageRecords(labels=np.arange(4), images=images)
    check_every_key(robustness.RobustnessConfig(), lambda config: robustness.fingerprint(config, clean))
    edited = images.copy()
    edited[0, 0, 0, 0] ^= 1
    config = robustness.RobustnessConfig()
    assert robustness.fingerprint(config, ImageRecords(labels=np.arange(4), images=edited)) != robustness.fingerprint(config, clean)


def test_the_declared_non_defining_keys():
    """What may change without redoing work: paths, log and checkpoint intervals, workers, evaluation-only keys, sweeps;
    a fine-tuning's rate search and demonstration cap enter its runs as the start's base_lr and the resolved max_steps,
    and its baselines are scored beside the runs, never in them."""
    declared = {
        name: sorted(".".join(path) for path, defining in leaves(config) if not defining)
        for name, config in {
            "fractals": FineFractalDBConfig(),
            "pretrain": pretrain.PretrainConfig(),
            "retrieval": retrieval.RetrievalConfig(),
            "classification": classification.ClassificationConfig(),
            "robustness": robustness.RobustnessConfig(),
        }.items()
    }
    loop = ["train.checkpoint_every", "train.log_every", "train.num_workers", "train.resume"]
    unselected_objectives = [name for name in known_objectives() if name != pretrain.PretrainConfig().objective]
    assert declared == {
        "fractals": ["workers"],  # fractals.outputs: written beside the table, never part of a family's settings
        # validation reads the model, never changes it; a transformer's optimizer enters as the `optimizer` it replaces;
        # the settings of the objectives it does not select
        "pretrain": sorted(["live_dir", "run_dir", *loop, "transformer_optimizer", "validation", *unselected_objectives]),
        "retrieval": [
            "baselines", "data.eval_batch_size", "data.eval_workers", "data.faiss_threads", "data.ks", "data.root",
            "demo_max_steps", "live_dir", "n_example_queries", "rate_search", "run_dir", "seeds", "starts", *loop,
        ],
        "classification": [
            "baselines", "datasets", "eval_batch_size", "eval_workers", "live_dir", "rate_search", "run_dir", "starting_points", *loop,
        ],
        "robustness": ["batch_size", "device", "example_index", "released_root", "workers"],
    }


def test_a_run_is_redone_for_another_start_seed_dataset_or_world_size(fingerprint_table):
    config, start = retrieval.RetrievalConfig(), StartingPoint("fdsml", "pretrained_model")
    base = retrieval_fingerprint(config, start, 0, "w", CPU, "images")
    assert retrieval_fingerprint(config, start, 1, "w", CPU, "images") != base
    assert retrieval_fingerprint(config, StartingPoint("fdsml", "other.pt"), 0, "w", CPU, "images") != base
    assert retrieval_fingerprint(config, start, 0, "w", DistContext(torch.device("cpu"), world_size=8), "images") != base
    assert retrieval_fingerprint(config, start, 0, "w", CPU, "other images") != base
    # a start's own rate defines its run by its value: the shared rate set by hand (or chosen) is the same run
    shared = StartingPoint("fdsml", "pretrained_model", base_lr=config.optimizer.base_lr)
    assert retrieval_fingerprint(config, shared, 0, "w", CPU, "images") == base
    assert retrieval_fingerprint(config, dataclasses.replace(shared, base_lr=3e-4), 0, "w", CPU, "images") != base
    cls = classification.ClassificationConfig()
    assert classification_fingerprint(cls, classification.DatasetSettings("cifar10"), start, "w", CPU, "images") != (
        classification_fingerprint(cls, classification.DatasetSettings("digits"), start, "w", CPU, "images")
    )
    assert pretrain_fingerprint(pretrain.PretrainConfig(), fingerprint_table) != pretrain_fingerprint(pretrain.PretrainConfig(), fingerprint_table, 2)


def test_input_artefacts_enter_by_content(fingerprint_table):
    render, config = FINGERPRINT_SPEC, pretrain.PretrainConfig()
    edited = fingerprint_table.copy()
    edited.at[0, "coefficients"] = np.asarray(edited.at[0, "coefficients"]) * 0.999
    assert pretrain_fingerprint(config, edited, spec=render) != pretrain_fingerprint(config, fingerprint_table, spec=render)
    assert pretrain_fingerprint(config, fingerprint_table.copy(), spec=render) == pretrain_fingerprint(config, fingerprint_table, spec=render)

    weights = {"backbone.conv.weight": torch.zeros(2, 2), "head.weight": torch.ones(1)}
    other = {"backbone.conv.weight": torch.zeros(2, 2), "head.weight": torch.ones(1) * 2}
    trunk = {"backbone.conv.weight": torch.full((2, 2), 1e-6), "head.weight": torch.ones(1)}
    assert fingerprints.content_digest(weights) == fingerprints.content_digest({k: v.clone() for k, v in weights.items()})
    assert fingerprints.content_digest(weights) != fingerprints.content_digest(other)
    assert fingerprints.content_digest(weights) != fingerprints.content_digest(trunk)


def test_a_table_survives_a_parquet_round_trip_with_its_digest(fingerprint_table, tmp_path):
    """The stored table's digest is checked on reuse: a Parquet round trip must not change it, an edit must."""
    summary = generate_finefractaldb(FINGERPRINT_FRACTALS)[1]
    fingerprint_table.to_parquet(tmp_path / "codes.parquet")
    stored = pd.read_parquet(tmp_path / "codes.parquet")
    assert is_up_to_date(stored, summary, FINGERPRINT_SPEC)
    stored.at[3, "seed"] += 1
    assert not is_up_to_date(stored, summary, FINGERPRINT_SPEC)


def test_code_that_computes_a_step_enters_its_fingerprint(monkeypatch, tmp_path):
    """A change in the renderer redoes the codes table: the version string no longer decides."""
    closure = fingerprints.code_modules("fdsml.families.finefractaldb")
    assert {"fdsml.ifs.render", "fdsml.ifs.codes", "fdsml.config"} <= closure
    assert not any(name.startswith("fdsml.pipelines") for name in fingerprints.code_modules("fdsml.training.retrieval"))
    assert "fdsml.losses.pa_triplet" in fingerprints.code_modules("fdsml.training.pretrain")

    before = fractals_fingerprint(FINGERPRINT_FRACTALS)
    original = fingerprints.source_path
    edited = tmp_path / "render.py"
    edited.write_text(original("fdsml.ifs.render").read_text() + "\nCHANGED_RENDERER = True\n")
    monkeypatch.setattr(fingerprints, "source_path", lambda name: edited if name == "fdsml.ifs.render" else original(name))
    fingerprints.code_digest.cache_clear()
    try:
        assert fractals_fingerprint(FINGERPRINT_FRACTALS) != before
    finally:
        monkeypatch.undo()
        fingerprints.code_digest.cache_clear()
    assert fractals_fingerprint(FINGERPRINT_FRACTALS) == before


def test_declared_fields_keep_their_defaults_and_leave_the_configuration_at_any_depth():
    """A non-defining field and an unselected plug-in's settings are left out of nested dataclasses, lists, tuples
    and mappings alike (keys as strings); their defaults stay theirs. Declared here, not at import: the helpers run now."""

    @dataclasses.dataclass
    class Settings:
        kind: str = "a"
        workers: int = fingerprints.non_defining(default=4)
        options: dict = fingerprints.defining_when(lambda settings: settings.kind == "b", default_factory=lambda: {"x": 1})

    assert (Settings().workers, Settings().options) == (4, {"x": 1})
    assert not fingerprints.field_defines(dataclasses.fields(Settings)[1], Settings())
    nested = {"steps": [Settings(workers=1), (Settings(kind="b"),)], 7: Settings(kind="c")}
    assert fingerprints.defining_configuration(nested) == {
        "steps": [{"kind": "a"}, [{"kind": "b", "options": {"x": 1}}]],
        "7": {"kind": "c"},
    }


def test_a_tables_column_names_a_mappings_keys_and_a_files_bytes_enter_its_content_digest(tmp_path):
    table = pd.DataFrame({"seed": [1, 2], "n_maps": [3, 4]})
    assert fingerprints.content_digest(table) != fingerprints.content_digest(table.rename(columns={"seed": "class_id"}))
    weights = {"head.weight": torch.ones(2)}
    assert fingerprints.content_digest(weights) != fingerprints.content_digest({"head.bias": torch.ones(2)})
    path = tmp_path / "weights.pt"
    path.write_bytes(b"first")
    assert fingerprints.content_digest(path) == fingerprints.content_digest(str(path)) == hashlib.sha256(b"first").hexdigest()
    with pytest.raises(TypeError, match="no content digest for int"):
        fingerprints.content_digest(3)
