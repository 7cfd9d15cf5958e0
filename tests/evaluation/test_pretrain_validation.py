"""Held-out validation: the ordering agreement by hand, a call that leaves the model and the RNG as they were, the
cached one-pass validation against the plain computation, and its one log line."""

import dataclasses
import logging
import re
import time

import numpy as np
import pandas as pd
import pytest
import torch

from fdsml.data import ImageRecords, ImageRecordsDataset, ImageTransform, RetrievalSplits, fractal_input
from fdsml.config import ConfigError
from fdsml.data.holdout import HoldoutSettings, split_table
from fdsml.evaluation.embedding import trunk_autocast
from fdsml.evaluation.classification import topk_accuracy
from fdsml.evaluation.frozen_probe import frozen_probe
from fdsml.evaluation.pretrain_validation import (
    METRICS,
    HeldoutTriplets,
    PretrainValidation,
    ProbeImages,
    evaluation_mode,
    ordering_agreement,
    probe_splits,
    trunk_features,
    validation_line,
)
from fdsml.evaluation.retrieval import retrieval_metrics
from fdsml.evaluation.validation_settings import ProbeSettings, ValidationSettings
from fdsml.models import build_model
from fdsml.training.model_setup import freeze_batchnorm
from fdsml.training.pretrain import normalized_distances, parse_pretrain_params


def test_ordering_agreement_by_hand():
    # unit directions: 0 at 0 degrees, 1 at ~6 degrees, 2 at 90 degrees, 3 at 180 degrees (lengths do not matter)
    vectors = torch.tensor([[1.0, 0.0], [10.0, 1.0], [0.0, 3.0], [-0.5, 0.0]])
    triplets = HeldoutTriplets(
        anchors=np.array([0, 0, 1]),
        first=np.array([1, 2, 3]),
        second=np.array([2, 3, 2]),
        descriptor_first=np.array([True, False, False]),
    )
    # by the vectors candidate 1 is nearer in (0, 1, 2) and (0, 2, 3), farther in (1, 3, 2):
    # the descriptor agrees with the first and the third
    assert ordering_agreement(vectors, triplets) == 2 / 3
    # descriptor first everywhere: the vectors agree on the first two, each triplet compared row by row
    assert ordering_agreement(vectors, dataclasses.replace(triplets, descriptor_first=np.ones(3, bool))) == 2 / 3


def test_the_agreement_is_measured_in_the_distance_the_objective_trained():
    # candidate 1 points the anchor's way but lies far out (raw distance 9.06), candidate 2 lies at 90 degrees
    # close by (raw 1.41): normalised, candidate 1 is nearer; raw, candidate 2
    vectors = torch.tensor([[1.0, 0.0], [10.0, 1.0], [0.0, 1.0]])
    triplets = HeldoutTriplets(anchors=np.array([0]), first=np.array([1]), second=np.array([2]), descriptor_first=np.array([True]))
    assert ordering_agreement(vectors, triplets, normalize=True) == 1.0
    assert ordering_agreement(vectors, triplets, normalize=False) == 0.0


@pytest.mark.parametrize(
    ("objective", "section", "normalized"),
    [
        ("pa_triplet", {"pa_triplet": {"normalize_embeddings": False}}, False),
        ("pa_triplet", {}, True),
        ("fdsl_pa", {"fdsl_pa": {"normalize_embeddings": False}}, False),
        ("label_triplet", {"label_triplet": {"normalize_embeddings": False}}, False),
        ("fdsl", {}, True),
        ("pml", {}, True),
    ],
)
def test_each_objective_names_the_distance_it_trains(objective, section, normalized):
    assert normalized_distances(parse_pretrain_params({"objective": objective, **section})) is normalized


def test_triplets_are_ordered_by_the_descriptor_distance():
    class_ids = np.array([0, 0, 0, 1, 1, 1])
    psi = np.array([[0.0], [1.0], [5.0], [20.0], [21.0], [30.0]]) * np.ones((1, 6))
    triplets = HeldoutTriplets.draw(class_ids, psi, "same", 50, np.random.default_rng(0))
    near = np.linalg.norm(psi[triplets.anchors] - psi[triplets.first], axis=1) <= np.linalg.norm(
        psi[triplets.anchors] - psi[triplets.second], axis=1
    )
    assert np.array_equal(triplets.descriptor_first, near) and near.any() and not near.all()
    assert (class_ids[triplets.first] == class_ids[triplets.anchors]).all()
    assert HeldoutTriplets.draw(class_ids[:2], psi[:2], "diff", 5, np.random.default_rng(0)) is None  # one class only


class _Renderings:
    """A formula-family-like dataset by table row: uint8 renderings of a class-dependent bar plus noise."""

    def __init__(self, table):
        self.labels = table["class_id"].to_numpy()
        self.psi = np.stack(table["psi"].to_list())

    def __getitem__(self, row):
        image = torch.randint(0, 100, (1, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(row))
        image[:, 2 * self.labels[row] : 2 * self.labels[row] + 3] += 150
        return {"image": image, "label": int(self.labels[row]), "psi": torch.from_numpy(self.psi[row]), "index": row}

    def model_input(self, images):
        return fractal_input(images)


def _five_classes_split():
    """Five classes of six items with random descriptors, and their held-out split."""
    table = pd.DataFrame({"class_id": np.repeat(np.arange(5), 6), "psi": [np.random.default_rng(i).random(6) for i in range(30)]})
    return table, split_table(table, HoldoutSettings(0.34, 0.4), seed=0)


def test_a_validation_leaves_every_module_mode_and_the_random_state_as_it_found_them():
    table, split = _five_classes_split()
    validation = PretrainValidation(ValidationSettings(every=1, triplets=20), _Renderings(table), split, classifier=True, seed=0)
    torch.manual_seed(0)
    model = build_model("resnet18", img_size=16, head="classifier", num_classes=len(split.training_classes))
    model.train()
    freeze_batchnorm(model)
    modes = [m.training for m in model.modules()]
    state = torch.get_rng_state()
    started = time.perf_counter()
    result = validation(model, step=1)
    took = time.perf_counter() - started
    assert [m.training for m in model.modules()] == modes
    assert torch.equal(torch.get_rng_state(), state)
    assert set(METRICS) <= set(result) and 0 < result["validation_s"] <= took
    assert np.isnan(result["val_probe_recall_at_1"])  # no probe configured
    assert 0 <= result["val_unseen_region_top1"] <= 1 and 0 <= result["val_unseen_class_recall_at_1"] <= 1
    # every measured metric has its binomial standard error over the items it scored: here 20 triplets per filter
    agreements = [name for name in validation.available if name.startswith("val_unseen_agreement_")]
    assert agreements
    for name in agreements:
        assert result[f"se_{name}"] == pytest.approx(np.sqrt(result[name] * (1 - result[name]) / 20))
    instances = int(validation.instance_part.sum())
    top1 = result["val_unseen_region_top1"]
    assert result["se_val_unseen_region_top1"] == pytest.approx(np.sqrt(top1 * (1 - top1) / instances))
    assert np.isnan(result["se_val_probe_recall_at_1"])


def _probe(records_per_class: int = 8) -> RetrievalSplits:
    """A small probe dataset: six kinds of 24 px image (a dark band at a class-dependent row), grey noise on top."""
    labels = np.repeat(np.arange(6), records_per_class)
    images = np.full((len(labels), 24, 24), 230, dtype=np.uint8)
    for index, label in enumerate(labels):
        images[index, 3 * label : 3 * label + 4] = 20
    images += np.random.default_rng(1).integers(0, 20, images.shape, dtype=np.uint8)
    records = ImageRecords(labels=labels, images=images)
    return RetrievalSplits("toy", records, (1,), test=records)


def _uncached_metrics(validation: PretrainValidation, model, probe: RetrievalSplits, image_size: int) -> dict[str, float]:
    """The metrics computed the plain way: held-out images and probe embedded apart, the probe read from its
    records through the frozen probe, every Recall@1 from the full retrieval metrics."""
    result = dict.fromkeys(METRICS, float("nan"))
    with evaluation_mode(model):
        with trunk_autocast(torch.device("cpu")):  # every evaluation's trunk precision (bf16 where the CPU has it)
            features = torch.cat([model.features(batch) for batch in validation.images.split(7)]).float()
        outputs = model.head(features)
        vectors = features if validation.classifier else outputs
        for name, triplets in validation.triplets.items():
            if triplets is not None:
                result[f"val_unseen_agreement_{name}"] = ordering_agreement(vectors, triplets, validation.normalize)
        if validation.classifier:
            result["val_unseen_region_top1"] = topk_accuracy(outputs[validation.instance_part], validation.instance_labels, (1,))[1]
        unseen = (~validation.instance_part).numpy()
        full = retrieval_metrics(vectors[unseen], validation.class_ids[unseen], ks=(1,), seed=0)
        result["val_unseen_class_recall_at_1"] = full["recall@1"]
        splits = probe_splits(probe, validation.settings.probe.max_images, 0)
        result["val_probe_recall_at_1"] = frozen_probe(model, splits, image_size, crop_fraction=0.875, batch_size=5)["recall@1"]
    return result


@pytest.mark.parametrize(("classifier", "normalize"), [(False, True), (False, False), (True, True)])
def test_the_cached_one_pass_validation_gives_the_metrics_of_the_uncached_one(classifier, normalize, caplog):
    table, split = _five_classes_split()
    settings = ValidationSettings(every=1, triplets=40, batch_size=9, probe=ProbeSettings(dataset="toy", max_images=30))
    probe = _probe()
    with caplog.at_level(logging.INFO, logger="fdsml"):
        validation = PretrainValidation(
            settings, _Renderings(table), split, classifier=classifier, seed=0, normalize=normalize, probe=probe, probe_image_size=16
        )
    assert re.fullmatch(r"Validation every 1 steps: \d+ held-out images, 30 toy probe images", caplog.messages[-1])
    torch.manual_seed(0)
    head = {"head": "classifier", "num_classes": len(split.training_classes)} if classifier else {"embedding_dim": 8}
    model = build_model("resnet18", img_size=16, **head)
    cached = [validation(model, step) for step in (1, 2)]  # the second call reads the cache the first left
    expected = _uncached_metrics(validation, model, probe, 16)
    for result in cached:
        for name in METRICS:
            assert result[name] == pytest.approx(expected[name], abs=1e-12, nan_ok=True), name
    assert 0 < expected["val_probe_recall_at_1"] < 1 and not np.isnan(expected["val_unseen_agreement_same"])
    assert validation.available[-1] == "val_probe_recall_at_1"  # a configured probe's recall is logged too
    assert len(validation.probe.labels) == 30 and validation.probe.images.dtype == torch.uint8
    view = ImageRecordsDataset(probe_splits(probe, 30, 0).test, ImageTransform(16, train=False, crop_fraction=0.875))
    assert torch.equal(validation.probe.images.float() / 255.0, torch.stack([view[i]["image"] for i in range(len(view))]))


def test_one_pass_over_two_parts_gives_each_part_its_own_features():
    torch.manual_seed(0)
    model = build_model("resnet18", img_size=16, embedding_dim=8).eval()
    floats, bytes_ = torch.rand(5, 3, 16, 16), torch.randint(0, 256, (7, 3, 16, 16), dtype=torch.uint8)
    with torch.no_grad():
        joint = trunk_features(model, [floats, bytes_], batch_size=4)  # batches 4 | 1 + 3 | 4
        with trunk_autocast(torch.device("cpu")):
            apart = [model.features(floats).float(), model.features(bytes_.float() / 255.0).float()]
        other_size = trunk_features(model, [floats, torch.rand(2, 3, 20, 20)], batch_size=4)
    assert [part.shape for part in joint] == [(5, 512), (7, 512)] and [part.shape[0] for part in other_size] == [5, 2]
    for mine, theirs in zip(joint, apart):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)


def test_a_validation_logs_one_line_of_the_metrics_its_objective_can_have(caplog):
    table, split = _five_classes_split()
    settings = ValidationSettings(every=1, triplets=20)
    torch.manual_seed(0)
    lines = {}
    for classifier, head in ((False, {"embedding_dim": 8}), (True, {"head": "classifier", "num_classes": len(split.training_classes)})):
        validation = PretrainValidation(settings, _Renderings(table), split, classifier=classifier, seed=0)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="fdsml"):
            result = validation(build_model("resnet18", img_size=16, **head), step=18)
        [record] = [r for r in caplog.records if r.getMessage().startswith("validation at step")]
        lines[classifier] = record.getMessage()
        assert "\n" not in lines[classifier] and "nan" not in lines[classifier] and "{" not in lines[classifier]
        assert f"({result['validation_s']:.1f} s)" in lines[classifier]
        assert f"val_unseen_class_recall_at_1 {result['val_unseen_class_recall_at_1']:.3f}" in lines[classifier]
        assert "val_probe_recall_at_1" not in lines[classifier]  # no probe configured
    assert "val_unseen_region_top1" not in lines[False]  # PA-Triplet's embedding has no training-class logits
    assert lines[True].count("val_unseen_region_top1 ") == 1
    assert re.fullmatch(r"validation at step 18 \(\d+\.\d s\): (val_\w+ \d\.\d{3}(, )?)+", lines[True])


def test_validation_line_rounds_and_names_only_the_given_metrics():
    result = {"val_unseen_agreement_all": 0.61234, "val_unseen_region_top1": float("nan"), "validation_s": 2.249}
    line = validation_line(36, result, ("val_unseen_agreement_all",))
    assert line == "validation at step 36 (2.2 s): val_unseen_agreement_all 0.612"


def test_a_probe_with_a_query_set_searches_the_gallery_with_the_queries():
    toy = _probe(records_per_class=4)
    splits = RetrievalSplits("toy", toy.test, (1,), query=toy.test.subset(np.arange(0, 24, 2)), gallery=toy.test.subset(np.arange(1, 24, 2)))
    probe = ProbeImages.read(splits, 16, 0.875)
    assert probe.queries == 12 and len(probe.labels) == 24
    features = torch.from_numpy(np.random.default_rng(0).normal(size=(24, 8)).astype(np.float32))
    features[12:] = features[:12] + 0.01  # each gallery image next to its query, same label
    expected = retrieval_metrics(features[12:], probe.labels[12:], ks=(1,), query_embeddings=features[:12], query_labels=probe.labels[:12])
    assert probe.recall_at_1(features, seed=0) == (expected["recall@1"], 12) and expected["recall@1"] == 1.0  # 12 queries scored


def test_the_held_out_images_are_a_seeded_subset_of_at_most_max_images_per_part(caplog):
    table, split = _five_classes_split()
    settings = ValidationSettings(every=1, triplets=5, max_images=3)
    validation = lambda seed: PretrainValidation(settings, _Renderings(table), split, classifier=False, seed=seed)
    rows = lambda seed: validation(seed).images
    assert len(split.heldout_instances) > 3 and len(split.heldout_classes) > 3
    assert len(rows(0)) == 6 and torch.equal(rows(0), rows(0)) and not torch.equal(rows(0), rows(1))
    with caplog.at_level(logging.INFO, logger="fdsml"):
        assert validation(0).normalize  # by default
    assert caplog.messages[-1] == "Validation every 1 steps: 6 held-out images"  # no probe, no probe clause


def test_a_probe_with_a_query_set_keeps_its_name_and_training_split_and_draws_queries_and_gallery_apart():
    toy = _probe()
    splits = RetrievalSplits("toy", toy.train, (1,), query=toy.test.subset(np.arange(0, 48, 2)), gallery=toy.test.subset(np.arange(1, 48, 2)))
    probe = probe_splits(splits, 10, seed=0)
    assert (probe.name, probe.train, probe.test) == ("toy", toy.train, None)
    assert len(probe.query) == len(probe.gallery) == 10 == len(set(map(bytes, probe.query.images)))  # drawn without replacement
    assert set(map(bytes, probe.query.images)) < set(map(bytes, splits.query.images))  # each part drawn from its own
    assert set(map(bytes, probe.gallery.images)) < set(map(bytes, splits.gallery.images))
    assert probe_splits(splits, 10, seed=0).query.labels.tolist() == probe.query.labels.tolist()  # seeded
    assert probe_splits(splits, 100, seed=0).query.labels.tolist() == splits.query.labels.tolist()  # all, when fewer


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("every", -1, "pretrain.validation.every: must be >= 0 (0 or null disables), got -1"),
        ("triplets", 0, "pretrain.validation.triplets: must be positive, got 0"),
        ("max_images", 0, "pretrain.validation.max_images: must be positive, got 0"),
        ("batch_size", -2, "pretrain.validation.batch_size: must be positive, got -2"),
    ],
)
def test_the_validation_settings_name_the_key_they_refuse(key, value, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message) + "$"):
        ValidationSettings(**{key: value})


def test_the_probe_settings_name_the_key_they_refuse():
    with pytest.raises(ConfigError, match=r"pretrain\.validation\.probe\.max_images"):
        ProbeSettings(max_images=0)
    with pytest.raises(ConfigError, match=r"pretrain\.validation\.probe\.image_size"):
        ProbeSettings(image_size=-16)


@pytest.mark.parametrize(("every", "due_steps"), [(5, [5, 10, 12]), (1, list(range(1, 13))), (0, [])])
def test_a_validation_is_due_every_so_many_steps_and_at_the_last(every, due_steps):
    table, split = _five_classes_split()
    validation = PretrainValidation(ValidationSettings(every=every, triplets=20), _Renderings(table), split, classifier=True, seed=0)
    assert [step for step in range(1, 13) if validation.due(step, 12)] == due_steps
