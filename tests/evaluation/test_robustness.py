"""The robustness core: its refusals of sets that cannot be seen at the classifiers' test view, and what defines a generated set."""

import dataclasses

import numpy as np
import pytest
from PIL import Image

from fdsml.config import ConfigError
from fdsml.data import ImageRecords, ImageTransform
from fdsml.data.classification_datasets import ClassificationSplits
from fdsml.errors import MissingInputError
from fdsml.evaluation.corruptions import benchmark_corruptions
from fdsml.evaluation.robustness import corrupted_test_set, evaluate_robustness, fingerprint, parse_robustness_params
from fdsml.training.classification import DatasetSettings


def test_released_imagenet_c_needs_classifiers_at_its_own_test_view(tmp_path):
    config = parse_robustness_params({"benchmark": "imagenet_c", "released_root": str(tmp_path)})
    with pytest.raises(ValueError, match=r"\(224, 0.875\).*\(32, 1.0\).*classification.image_size"):
        corrupted_test_set(config, DatasetSettings(), 0, (32, 1.0), None)
    assert corrupted_test_set(config, DatasetSettings(), 0, (224, 0.875), None)["view"] == (224, 0.875)


def test_generated_sets_need_a_test_view_the_corruptions_accept():
    with pytest.raises(ConfigError, match="classification.image_size: corruptions need images of at least 32 px, got 16"):
        corrupted_test_set(parse_robustness_params({}), DatasetSettings(), 0, (16, 1.0), None)


def test_the_view_is_the_classifiers_not_a_robustness_key():
    with pytest.raises(ConfigError, match=r"robustness: unknown key\(s\) image_size"):
        parse_robustness_params({"image_size": 32})


def test_a_generated_sets_fingerprint_is_its_clean_images_labels_and_settings():
    config = parse_robustness_params({})
    images = np.zeros((2, 32, 32, 3), np.uint8)
    clean = ImageRecords(labels=np.array([0, 1]), images=images)
    same = fingerprint(config, ImageRecords(labels=np.array([0, 1]), images=images.copy()))
    brighter = fingerprint(config, ImageRecords(labels=np.array([0, 1]), images=images + 1))
    relabelled = fingerprint(config, ImageRecords(labels=np.array([1, 0]), images=images))
    reseeded = fingerprint(dataclasses.replace(config, seed=1), clean)
    assert fingerprint(config, clean) == same and len({same, brighter, relabelled, reseeded}) == 4
    assert fingerprint(dataclasses.replace(config, batch_size=7), clean) == same  # scoring settings do not define it


def test_robustness_refuses_missing_classifiers_and_a_stored_set_of_another_benchmark_or_dataset():
    config, digits = parse_robustness_params({}), DatasetSettings("digits")
    classifier = [{"metadata": {"start": "scratch", "dataset": "digits"}}]
    with pytest.raises(MissingInputError, match=r"^no fine-tuned classifier for 'cifar10': .* with it among classification.datasets$"):
        evaluate_robustness(classifier, {}, config, DatasetSettings("cifar10"), 0)
    refused = r"^the stored corrupted test set belongs to another benchmark or dataset: run `kedro run --pipelines=robustness` to make it again$"
    for stored in ({"benchmark": "imagenet_c", "dataset": "digits"}, {"benchmark": "cifar10_c", "dataset": "fashion_mnist"}):
        with pytest.raises(MissingInputError, match=refused):
            evaluate_robustness(classifier, stored, config, digits, 0)


def test_images_already_at_the_classifiers_view_are_only_scaled_and_raw_ones_go_through_it():
    """Generated sets hold views; released ones hold raw clean images, and corrupted ones already at the view where the
    benchmark fixes one (CIFAR-10-C's 32 px), raw where it does not (ImageNet-C)."""
    from fdsml.evaluation.robustness import _transforms

    as_they_are, through_view = ImageTransform(32, crop_fraction=1.0), ImageTransform(32, crop_fraction=0.5)
    assert _transforms({"source": "generated", "view": None}, (32, 0.5)) == (as_they_are, as_they_are)
    assert _transforms({"source": "released", "view": (32, 1.0)}, (32, 0.5)) == (through_view, as_they_are)
    assert _transforms({"source": "released", "view": None}, (32, 0.5)) == (through_view, through_view)


def test_a_set_stored_at_one_view_is_refused_to_a_classifier_of_another():
    images = np.zeros((2, 32, 32, 3), np.uint8)
    stored = {"benchmark": "cifar10_c", "dataset": "digits", "source": "generated", "view": [32, 1.0],
              "keys": ["clean", "fog/1"], "shards": [images, images], "labels": [0, 1]}  # fmt: skip
    classifier = [{"metadata": {"start": "scratch", "dataset": "digits", "image_size": 16, "crop_fraction": 0.875}}]
    with pytest.raises(ValueError, match=r"^the corrupted test set is at the test view \(image_size, crop_fraction\) = \(32, 1\.0\), the classifier's is \(16, 0\.875\)"):
        evaluate_robustness(classifier, stored, parse_robustness_params({}), DatasetSettings("digits"), 0)


def _reading(monkeypatch, splits: ClassificationSplits) -> list[tuple]:
    """Robustness reads ``splits`` for any dataset; the list gets each read's (name, root, seed)."""
    from fdsml.evaluation import robustness

    reads = []
    monkeypatch.setattr(robustness, "read_classification_dataset", lambda name, root, *, seed: reads.append((name, root, seed)) or splits)
    return reads


def test_a_released_set_is_read_from_its_root_labelled_by_the_classifiers_training_classes(tmp_path, monkeypatch):
    """ImageNet-C's folders are labelled by the classes of the dataset the classifiers were trained on, read from the
    dataset's root with the split seed; its clean images are that dataset's test split."""
    from fdsml.evaluation import robustness

    for corruption in benchmark_corruptions("imagenet_c"):  # every one of the benchmark's folders: all are read
        for severity in range(1, 6):
            folder = tmp_path / corruption / str(severity) / "n02"
            folder.mkdir(parents=True)
            Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(folder / "x.JPEG", format="JPEG")
    test = ImageRecords(labels=np.array([0, 1]), images=np.zeros((2, 4, 4, 3), np.uint8))
    splits = ClassificationSplits("imagenet100", test, test, 3, class_names=("n00", "n01", "n02"))
    reads = _reading(monkeypatch, splits)
    stored = {"source": "released", "benchmark": "imagenet_c", "root": str(tmp_path)}
    clean, corrupted = robustness._clean_and_corrupted(stored, DatasetSettings("imagenet100", root="/data/in100"), 4)
    assert reads == [("imagenet100", "/data/in100", 4)] and clean is test
    assert corrupted.sets[("fog", 1)].labels.tolist() == [2]  # n02 is the third training class, not the only folder
    assert robustness.load_sets(stored)[1].sets[("fog", 1)].labels.tolist() == [0]  # without them: numbered on its own


def test_a_generated_set_is_read_back_under_its_benchmark():
    from fdsml.evaluation.robustness import load_sets

    images = np.zeros((2, 32, 32, 3), np.uint8)
    stored = {"benchmark": "cifar10_c", "source": "generated", "keys": ["clean", "fog/1"], "shards": [images, images], "labels": [0, 1]}
    clean, corrupted = load_sets(stored)
    assert (corrupted.benchmark, corrupted.source, list(corrupted.sets)) == ("cifar10_c", "generated", [("fog", 1)])
    assert clean.labels.tolist() == [0, 1]


def test_the_results_record_and_table_hold_each_starts_errors_by_group_and_type():
    """Per start: its clean error, each group's error and each corruption's mean over severities (the record), and the
    markdown table of the clean and group errors in %."""
    import pandas as pd

    from fdsml.evaluation.corruptions import CORRUPTION_GROUPS, CorruptedSet
    from fdsml.evaluation.robustness import _markdown, _metrics

    table = pd.DataFrame(
        [(model, corruption, severity, error)
         for model, base in (("scratch", 0.5), ("fdsml", 0.25))
         for corruption, shift in (("fog", 0.0), ("gaussian_noise", 0.125))
         for severity, error in ((1, base + shift), (2, base + shift + 0.25))],
        columns=["model", "corruption", "severity", "error"],
    )  # fmt: skip
    groups = pd.DataFrame({"noise": [0.75, 0.5], "weather": [0.625, 0.375]}, index=["scratch", "fdsml"])
    clean = {"scratch": 0.125, "fdsml": 0.0625}
    records = ImageRecords(labels=np.array([0]), images=np.zeros((1, 32, 32, 3), np.uint8))
    corrupted = CorruptedSet("cifar10_c", {("fog", 1): records, ("gaussian_noise", 1): records}, "generated")
    stored = {"source": "generated", "dataset": "digits"}
    record = _metrics(table, groups, clean, corrupted, parse_robustness_params({}), stored, 40)
    assert record == {
        "benchmark": "cifar10_c", "source": "generated", "dataset": "digits", "images": 40,
        "groups": {group: list(names) for group, names in CORRUPTION_GROUPS["cifar10_c"].items()},
        "results": {
            "scratch": {"clean_error": 0.125, "noise": 0.75, "weather": 0.625, "per_corruption": {"fog": 0.625, "gaussian_noise": 0.75}},
            "fdsml": {"clean_error": 0.0625, "noise": 0.5, "weather": 0.375, "per_corruption": {"fog": 0.375, "gaussian_noise": 0.5}},
        },
    }  # fmt: skip
    assert _markdown(groups, clean) == (
        "| starting point | clean | noise | weather |\n"
        "|---|---:|---:|---:|\n"
        "| scratch | 12.50 | 75.00 | 62.50 |\n"
        "| fdsml | 6.25 | 50.00 | 37.50 |\n"
    )


def test_the_example_is_the_image_asked_for_clipped_to_the_set_with_its_clean_version_first():
    from fdsml.evaluation.robustness import corruption_examples

    clean, fog = (np.stack([np.full((32, 32, 3), value + i, np.uint8) for i in range(3)]) for value in (100, 10))
    stored = {"benchmark": "cifar10_c", "source": "generated", "keys": ["clean", "fog/1"], "shards": [clean, fog], "labels": [0, 1, 2]}
    for asked, shown in ((1, 1), (7, 2)):
        figure = corruption_examples(stored, parse_robustness_params({"example_index": asked}))
        assert figure.texts[0].get_text() == f"cifar10_c (generated): test image {shown}"
        assert [int(axis.get_images()[0].get_array()[0, 0, 0]) for axis in figure.axes] == [100 + shown, 10 + shown]


def test_the_corruption_packages_version_defines_a_generated_set(monkeypatch):
    """Another imagecorruptions release may corrupt differently: its version is part of what defines the set."""
    from fdsml.evaluation import robustness

    clean = ImageRecords(labels=np.array([0, 1]), images=np.zeros((2, 32, 32, 3), np.uint8))
    asked = []
    monkeypatch.setattr(robustness, "version", lambda name: asked.append(name) or "1.0")
    first = fingerprint(parse_robustness_params({}), clean)
    monkeypatch.setattr(robustness, "version", lambda name: "2.0")
    assert fingerprint(parse_robustness_params({}), clean) != first and asked == ["imagecorruptions-imaug"]


def test_a_missing_released_root_is_said_and_the_set_generated_from_the_datasets_own_root(tmp_path, monkeypatch, caplog):
    from fdsml.evaluation.corruptions import clean_test_images

    images = np.zeros((8, 32, 32, 3), np.uint8)
    test = ImageRecords(labels=np.arange(8), images=images)
    splits = ClassificationSplits("digits", test, test, 8)
    reads = _reading(monkeypatch, splits)
    config = parse_robustness_params({"released_root": str(tmp_path / "absent"), "severities": [1], "max_images": 3, "seed": 5})
    with caplog.at_level("WARNING", logger="fdsml"):
        stored = corrupted_test_set(config, DatasetSettings("digits", root="/data/digits"), 3, (32, 1.0), None)
    assert caplog.messages[0] == f"{tmp_path / 'absent'} not found: generating cifar10_c from the clean test set instead"
    assert stored["source"] == "generated" and reads == [("digits", "/data/digits", 3)]
    drawn = clean_test_images(test, 32, 1.0, max_images=3, seed=5)  # the subset the robustness seed draws
    assert stored["labels"] == drawn.labels.tolist() != clean_test_images(test, 32, 1.0, max_images=3, seed=0).labels.tolist()
    assert stored["fingerprint"] == fingerprint(config, drawn)


def test_a_view_too_small_to_corrupt_is_refused_with_both_fixes_and_a_released_view_names_its_benchmark(tmp_path):
    with pytest.raises(ConfigError) as small:
        corrupted_test_set(parse_robustness_params({}), DatasetSettings(), 0, (16, 1.0), None)
    assert str(small.value) == (
        "classification.image_size: corruptions need images of at least 32 px, got 16; raise it, or point "
        "robustness.released_root at released files"
    )
    config = parse_robustness_params({"benchmark": "imagenet_c", "released_root": str(tmp_path)})
    with pytest.raises(ValueError, match=r"^released imagenet_c is at the test view"):
        corrupted_test_set(config, DatasetSettings(), 0, (32, 1.0), None)


def test_a_stored_generated_set_of_the_same_fingerprint_is_reused_and_reported_as_such(monkeypatch, caplog):
    """The second call finds the first's set up to date: it is returned as stored (less its folder and count), the log
    says so with the fingerprint's head, and the run's report records the step as reused; a new set is reported new."""
    from fdsml.run_events import StepReport, start_recording, stop_recording

    images = np.zeros((3, 32, 32, 3), np.uint8)
    test = ImageRecords(labels=np.arange(3), images=images)
    _reading(monkeypatch, ClassificationSplits("digits", test, test, 3))
    config = parse_robustness_params({"severities": [1]})
    recording = start_recording()
    try:
        first = corrupted_test_set(config, DatasetSettings("digits"), 0, (32, 1.0), None)
        with caplog.at_level("INFO", logger="fdsml"):
            again = corrupted_test_set(config, DatasetSettings("digits"), 0, (32, 1.0), first | {"folder": "x", "count": 3})
    finally:
        stop_recording(recording)
    assert again.keys() == first.keys() and again["fingerprint"] == first["fingerprint"]
    assert caplog.messages[-1] == f"The corrupted test set is up to date (fingerprint {first['fingerprint'][:12]}): reusing it"
    assert recording == [StepReport("corrupted test set", "corrupted_test_set", reused=False), StepReport("corrupted test set", "corrupted_test_set", reused=True)]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"max_images": 0}, "robustness.max_images: must be positive, got 0"),
        ({"batch_size": 0}, "robustness.batch_size: must be positive, got 0"),
        ({"workers": -1}, "robustness.workers: must be >= 0, got -1"),
        ({"severities": []}, "robustness.severities: choose among [1, 2, 3, 4, 5], got []"),
        ({"severities": [0, 6]}, "robustness.severities: choose among [1, 2, 3, 4, 5], got [0, 6]"),
        ({"example_index": -1}, "robustness.example_index: must be >= 0, got -1"),
    ],
)
def test_each_wrong_robustness_setting_is_refused_by_its_full_key(settings, message):
    with pytest.raises(ConfigError) as refused:
        parse_robustness_params(settings)
    assert str(refused.value) == message


def test_a_dataset_outside_the_classification_datasets_is_refused_naming_them_all():
    from fdsml.evaluation.robustness import find_dataset

    datasets = [DatasetSettings("digits"), DatasetSettings("fashion_mnist")]
    assert find_dataset(parse_robustness_params({"dataset": "fashion_mnist"}), datasets) is datasets[1]
    with pytest.raises(ConfigError) as refused:
        find_dataset(parse_robustness_params({"dataset": "cifar10"}), datasets)
    assert str(refused.value) == "robustness.dataset: 'cifar10' is not among classification.datasets (digits, fashion_mnist)"


def test_a_generated_set_is_corrupted_at_the_robustness_seed(monkeypatch):
    """The stored shards are the corruptions drawn from ``robustness.seed``, not from any other seed (the first
    corrupted shard, Gaussian noise, is compared: the shards are made lazily)."""
    from itertools import islice

    from fdsml.evaluation.corruptions import generated_shards

    images = np.random.default_rng(0).integers(0, 256, size=(2, 32, 32, 3), dtype=np.uint8)
    test = ImageRecords(labels=np.arange(2), images=images)
    _reading(monkeypatch, ClassificationSplits("digits", test, test, 2))
    stored = corrupted_test_set(parse_robustness_params({"severities": [1], "seed": 5}), DatasetSettings("digits"), 0, (32, 1.0), None)
    assert stored["keys"][:2] == ["clean", "gaussian_noise/1"]
    first_corrupted = lambda shards: next(islice(shards, 1, None))
    drawn = lambda seed: first_corrupted(generated_shards(test, benchmark_corruptions("cifar10_c"), seed, (1,)))
    found = first_corrupted(stored["shards"])
    assert np.array_equal(found, drawn(5)) and not np.array_equal(found, drawn(0))


def test_each_classifier_is_scored_clean_then_corrupted_with_the_robustness_scoring_settings(monkeypatch, caplog):
    """``robustness.batch_size`` and ``workers`` and the device asked reach every scoring; each start's clean error
    is logged."""
    from fdsml.evaluation import robustness

    scored = []

    def errors(model, sets, transform, **settings):
        scored.append((model, list(sets), settings))
        return dict.fromkeys(sets, 0.25)

    monkeypatch.setattr(robustness, "model_from_payload", lambda payload: payload["metadata"]["start"])
    monkeypatch.setattr(robustness, "robustness_errors", errors)
    monkeypatch.setattr(robustness, "recorded_start", lambda payload: {})
    corruptions = benchmark_corruptions("cifar10_c")
    images = np.zeros((1, 32, 32, 3), np.uint8)
    stored = {"benchmark": "cifar10_c", "dataset": "digits", "source": "generated", "view": [32, 1.0], "labels": [0],
              "keys": ["clean", *(f"{name}/1" for name in corruptions)], "shards": [images] * (1 + len(corruptions))}  # fmt: skip
    classifier = {"metadata": {"start": "scratch", "dataset": "digits", "image_size": 32, "crop_fraction": 1.0}}
    config = parse_robustness_params({"batch_size": 7, "workers": 2})
    with caplog.at_level("INFO", logger="fdsml"):
        table, metrics, _ = evaluate_robustness([classifier], stored, config, DatasetSettings("digits"), 0, device="cuda")
    settings = {"batch_size": 7, "device": "cuda", "workers": 2}
    assert scored == [("scratch", [("clean", 0)], settings), ("scratch", [(name, 1) for name in corruptions], settings)]
    assert caplog.messages == ["scratch: clean error 0.2500"] and metrics["results"]["scratch"]["clean_error"] == 0.25
