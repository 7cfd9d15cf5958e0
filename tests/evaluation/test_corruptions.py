"""Corruption benchmarks: group tables, group averaging by hand, seeded generation of every corruption x severity,
and the released sets' readers on tiny fake copies."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from fdsml.data import DatasetLayoutError, ImageRecords
from fdsml.catalog_datasets import ArrayShardsDataset
from fdsml.evaluation.corruptions import (
    CORRUPTION_GROUPS,
    CORRUPTIONS,
    CorruptedSet,
    SEVERITIES,
    benchmark_corruptions,
    clean_test_images,
    corrupt_image,
    corrupt_images,
    corruption_seed,
    example_figure,
    generate_corrupted_arrays,
    error_table,
    generated_shards,
    group_errors,
    read_cifar10_c,
    read_imagenet_c,
    shard_keys,
    stored_sets,
)

# --- groups -----------------------------------------------------------------------------------------------


def test_group_tables_follow_the_method():
    cifar, imagenet = CORRUPTION_GROUPS["cifar10_c"], CORRUPTION_GROUPS["imagenet_c"]
    assert list(cifar) == list(imagenet) == ["noise", "blur", "weather", "digital", "geometric"]
    assert sorted(benchmark_corruptions("cifar10_c")) == sorted(CORRUPTIONS)  # all 19 released CIFAR-10-C types
    assert len(benchmark_corruptions("imagenet_c")) == 15
    extra = {name for group in cifar for name in set(cifar[group]) - set(imagenet[group])}
    assert extra == {"speckle_noise", "gaussian_blur", "spatter", "saturate"}  # the bracketed CIFAR-only types
    assert imagenet["geometric"] == ("elastic_transform",)


def hand_made_table() -> pd.DataFrame:
    """Model "a": error 0.1 * (position of the type in the benchmark) at severity 1, +0.2 at severity 5."""
    rows = []
    for position, corruption in enumerate(benchmark_corruptions("imagenet_c")):
        rows += [("a", corruption, 1, 0.1 * position), ("a", corruption, 5, 0.1 * position + 0.2)]
        rows += [("b", corruption, 3, 0.5)]
    return pd.DataFrame(rows, columns=["model", "corruption", "severity", "error"])


def test_group_errors_average_severities_then_types():
    groups = group_errors(hand_made_table(), "imagenet_c")
    # per type: 0.1 * position + 0.1; noise = positions 0-2, blur 3-6, weather 7-9, digital 10-13, geometric 14
    expected = {"noise": 0.2, "blur": 0.55, "weather": 0.9, "digital": 1.25, "geometric": 1.5, "mean": 0.8}
    for column, value in expected.items():
        assert groups.loc["a", column] == pytest.approx(value)
        assert groups.loc["b", column] == pytest.approx(0.5)
    # "mean" is over the 15 types, not over the 5 group means (which would be 0.88)
    assert groups.loc["a", "mean"] != pytest.approx(np.mean([expected[g] for g in CORRUPTION_GROUPS["imagenet_c"]]))


def test_group_errors_name_a_missing_type():
    table = hand_made_table()
    with pytest.raises(KeyError, match="lacks corruption type.*speckle_noise"):
        group_errors(table, "cifar10_c")
    with pytest.raises(KeyError, match="lacks corruption type.*frost"):
        group_errors(table[table["corruption"] != "frost"], "imagenet_c")
    with pytest.raises(KeyError) as two_missing:
        group_errors(table[~table["corruption"].isin(["fog", "frost"])], "imagenet_c")
    assert two_missing.value.args[0] == "imagenet_c: the error table lacks corruption type(s) frost, fog"  # benchmark order


def test_an_unknown_benchmark_is_refused_naming_the_known_ones():
    for refused in (lambda: benchmark_corruptions("mnist_c"), lambda: group_errors(hand_made_table(), "mnist_c")):
        with pytest.raises(KeyError) as unknown:
            refused()
        assert unknown.value.args[0] == "unknown corruption benchmark 'mnist_c'; choose one of cifar10_c, imagenet_c"


def test_error_table_is_the_long_form_group_errors_reads():
    table = error_table({"m": {("fog", 1): 0.25, ("fog", 2): 0.75}})
    assert table.to_dict("records") == [
        {"model": "m", "corruption": "fog", "severity": 1, "error": 0.25},
        {"model": "m", "corruption": "fog", "severity": 2, "error": 0.75},
    ]


# --- generation ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_images():
    """Two random colour images; skips where the corruption package (imagecorruptions-imaug) is not installed."""
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(2, 32, 32, 3), dtype=np.uint8)


def test_every_corruption_and_severity_is_seeded_and_leaves_global_state_alone(tiny_images):
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    changed = set()
    for corruption in CORRUPTIONS:
        for severity in SEVERITIES:
            first = corrupt_images(tiny_images, corruption, severity, seed=7)
            again = corrupt_images(tiny_images, corruption, severity, seed=7)
            assert first.shape == tiny_images.shape and first.dtype == np.uint8
            np.testing.assert_array_equal(first, again, err_msg=f"{corruption} {severity}")
            if not np.array_equal(first, tiny_images):
                changed.add(corruption)
    assert changed == set(CORRUPTIONS)  # every corruption does something to a colour image
    np.testing.assert_array_equal(np.random.get_state()[1], before)


@pytest.mark.parametrize("corruption", ["gaussian_noise", "gaussian_blur", "contrast", "pixelate"])
def test_distortion_grows_with_severity(tiny_images, corruption):
    distortion = [
        np.abs(corrupt_image(tiny_images[0], corruption, severity, seed=3).astype(float) - tiny_images[0]).mean()
        for severity in SEVERITIES
    ]
    assert all(later > earlier for earlier, later in zip(distortion, distortion[1:])), distortion


@pytest.mark.parametrize("corruption", ["shot_noise", "impulse_noise", "motion_blur"])
@pytest.mark.parametrize("severity", [1, 5])
def test_a_corruption_is_the_packages_own_output_at_that_severity_and_seed(tiny_images, corruption, severity):
    from imagecorruptions import corrupt

    state = np.random.get_state()
    np.random.seed(11)
    extra = {"seed": 11} if corruption == "impulse_noise" else {}
    expected = corrupt(tiny_images[1], severity=severity, corruption_name=corruption, **extra)
    np.random.set_state(state)
    np.testing.assert_array_equal(corrupt_image(tiny_images[1], corruption, severity, seed=11), expected)


def test_each_image_has_its_own_seed(tiny_images):
    """Image i of a batch is rebuilt alone from its own seed; another seed gives another draw."""
    for corruption in ("gaussian_noise", "glass_blur", "impulse_noise", "frost"):
        batch = corrupt_images(tiny_images, corruption, 3, seed=7)
        alone = corrupt_image(tiny_images[1], corruption, 3, corruption_seed(7, corruption, 3, 1))
        np.testing.assert_array_equal(batch[1], alone)
        assert not np.array_equal(batch, corrupt_images(tiny_images, corruption, 3, seed=8)), corruption
    assert corruption_seed(0, "fog", 1, 0) != corruption_seed(0, "fog", 1, 1) != corruption_seed(0, "fog", 2, 1)
    assert corruption_seed(0, "fog", 1, 0) != corruption_seed(0, "frost", 1, 0)  # and each corruption its own


def test_a_generated_set_is_drawn_from_its_seed(tiny_images):
    """The same seed, the same arrays (each pair's images by :func:`corrupt_images`); another seed, others."""
    drawn = lambda seed: [images for *_, images in generate_corrupted_arrays(tiny_images, ["gaussian_noise"], seed, (2,))]
    np.testing.assert_array_equal(drawn(5)[0], corrupt_images(tiny_images, "gaussian_noise", 2, 5))
    assert not np.array_equal(drawn(5)[0], drawn(6)[0])
    clean = ImageRecords(labels=np.array([3, 4]), images=tiny_images)
    shards = lambda seed: list(generated_shards(clean, ["gaussian_noise"], seed, (2,)))
    np.testing.assert_array_equal(shards(5)[1], drawn(5)[0])


def test_a_wrong_corruption_severity_or_size_is_refused_with_what_is_allowed(tiny_images):
    with pytest.raises(KeyError, match=r"unknown corruption 'smog'; choose one of gaussian_noise, shot_noise, impulse_noise, "):
        corrupt_image(tiny_images[0], "smog", 1, 0)
    with pytest.raises(ValueError, match=r"^severity must be one of \(1, 2, 3, 4, 5\), got 6$"):
        corrupt_image(tiny_images[0], "fog", 6, 0)
    with pytest.raises(ValueError, match=r"^images must be at least 32 x 32 to corrupt, got \(8, 40\); resize them first$"):
        corrupt_image(np.zeros((8, 40, 3), np.uint8), "fog", 1, 0)


def test_small_images_must_be_resized_first(tiny_images):
    with pytest.raises(ValueError, match="at least 32 x 32"):
        corrupt_image(np.zeros((8, 8), np.uint8), "fog", 1, 0)
    digits = ImageRecords(labels=np.arange(3), images=np.full((3, 8, 8), 200, np.uint8))
    clean = clean_test_images(digits, 32, max_images=2, seed=0)
    assert clean.images.shape == (2, 32, 32, 3) and (clean.images == 200).all() and len(set(clean.labels)) == 2


def test_a_generated_set_round_trips_through_array_shards(tmp_path, tiny_images):
    clean = ImageRecords(labels=np.array([3, 4]), images=tiny_images)
    corruptions, severities = ("fog", "pixelate"), (1, 5)
    keys = shard_keys(corruptions, severities)
    dataset = ArrayShardsDataset(str(tmp_path / "set"))
    dataset.save({"shards": generated_shards(clean, corruptions, 0, severities), "keys": keys, "labels": [3, 4]})
    stored = dataset.load()
    restored_clean, corrupted = stored_sets(stored["keys"], stored["shards"], np.array(stored["labels"]), "cifar10_c")
    np.testing.assert_array_equal(restored_clean.images, tiny_images)
    assert list(corrupted.sets) == [("fog", 1), ("fog", 5), ("pixelate", 1), ("pixelate", 5)]
    np.testing.assert_array_equal(corrupted.sets[("pixelate", 5)].images, corrupt_images(tiny_images, "pixelate", 5, 0))
    assert corrupted.sets[("fog", 1)].labels.tolist() == [3, 4]
    assert (corrupted.benchmark, corrupted.source) == ("cifar10_c", "generated")


def test_stored_shards_must_match_their_keys_clean_first():
    shards, labels = [np.zeros((2, 32, 32, 3), np.uint8)] * 2, np.array([0, 1])
    message = r"^stored corrupted set: 2 shards for 3 keys, the clean images first$"
    with pytest.raises(ValueError, match=message):
        stored_sets(["clean", "fog/1", "fog/2"], shards, labels, "cifar10_c")
    with pytest.raises(ValueError, match=message.replace("3 keys", "2 keys")):
        stored_sets(["fog/1", "clean"], shards, labels, "cifar10_c")


# --- released sets -----------------------------------------------------------------------------------------------


def test_cifar10_c_arrays_are_cut_into_five_severity_blocks(tmp_path):
    labels = np.tile([0, 1], 5)
    np.save(tmp_path / "labels.npy", labels)
    for index, corruption in enumerate(benchmark_corruptions("cifar10_c")):
        # image value = 10 * severity + position, so each block is recognisable
        values = np.repeat(10 * np.arange(1, 6), 2) + np.tile([0, 1], 5) + index
        np.save(tmp_path / f"{corruption}.npy", np.broadcast_to(values[:, None, None, None], (10, 32, 32, 3)).astype(np.uint8))
    corrupted = read_cifar10_c(tmp_path)
    assert len(corrupted.sets) == 19 * 5 and (corrupted.benchmark, corrupted.source) == ("cifar10_c", "released")
    block = corrupted.sets[("gaussian_noise", 3)]
    assert block.images[:, 0, 0, 0].tolist() == [30, 31] and block.labels.tolist() == [0, 1]


def test_cifar10_c_missing_files_are_named(tmp_path):
    with pytest.raises(DatasetLayoutError, match="^CIFAR-10-C: folder .* not found; it must contain labels.npy and one <corruption>.npy"):
        read_cifar10_c(tmp_path / "CIFAR-10-C")
    with pytest.raises(DatasetLayoutError, match="labels.npy not found"):
        read_cifar10_c(tmp_path)
    np.save(tmp_path / "labels.npy", np.zeros(5, np.int64))
    with pytest.raises(DatasetLayoutError, match="gaussian_noise.npy not found"):
        read_cifar10_c(tmp_path)


def test_imagenet_c_folders_are_labelled_by_the_training_classes(tmp_path):
    for severity in SEVERITIES:
        for wnid in ("n02", "n01"):
            folder = tmp_path / "fog" / str(severity) / wnid
            folder.mkdir(parents=True)
            Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(folder / "x.JPEG", format="JPEG")
    corrupted = read_imagenet_c(tmp_path, ["n00", "n01", "n02"], corruptions=["fog"])
    records = corrupted.sets[("fog", 2)]
    assert [p.parent.name for p in records.paths] == ["n01", "n02"] and records.labels.tolist() == [1, 2]
    with pytest.raises(DatasetLayoutError, match="not trained on"):
        read_imagenet_c(tmp_path, ["n01"], corruptions=["fog"])
    with pytest.raises(DatasetLayoutError, match=r"snow.1 not found; the folder must contain <corruption>/<severity 1..5>"):
        read_imagenet_c(tmp_path, ["n01", "n02"], corruptions=["snow"])


def test_imagenet_c_without_training_classes_numbers_its_own_and_reads_only_image_files(tmp_path):
    for severity in SEVERITIES:
        for wnid, suffix in (("n05", ".jpg"), ("n03", ".png"), ("n04", ".JPEG")):
            folder = tmp_path / "fog" / str(severity) / wnid
            folder.mkdir(parents=True)
            Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(folder / f"x{suffix}")
            (folder / "notes.txt").write_text("not an image")
    corrupted = read_imagenet_c(tmp_path, corruptions=["fog"])
    assert (corrupted.benchmark, corrupted.source) == ("imagenet_c", "released") and sorted(corrupted.sets) == [("fog", s) for s in SEVERITIES]
    records = corrupted.sets[("fog", 5)]
    assert [p.name for p in records.paths] == ["x.png", "x.JPEG", "x.jpg"] and records.labels.tolist() == [0, 1, 2]
    with pytest.raises(DatasetLayoutError, match=r"has classes the model was not trained on, e.g. \['n03', 'n04', 'n05'\]$"):
        read_imagenet_c(tmp_path, ["n00"], corruptions=["fog"])
    for path in (tmp_path / "fog" / "3").rglob("x.*"):
        path.unlink()
    with pytest.raises(DatasetLayoutError, match=r"^ImageNet-C: .*fog.3 holds no images; expected <corruption>/<severity 1..5>/<class wnid>/\*.JPEG$"):
        read_imagenet_c(tmp_path, corruptions=["fog"])
    with pytest.raises(DatasetLayoutError, match="ImageNet-C"):
        read_imagenet_c(tmp_path / "absent")


def test_imagenet_c_reads_every_benchmark_corruption_unless_told_and_names_what_it_lacks(tmp_path):
    for wnid in ("n01", "n02", "n03", "n04"):
        folder = tmp_path / "fog" / "1" / wnid
        folder.mkdir(parents=True)
        Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(folder / "x.png")
    expected = re.escape("<corruption>/<severity 1..5>/<class wnid>/*.JPEG")
    with pytest.raises(DatasetLayoutError, match=rf"^ImageNet-C: .*gaussian_noise.1 not found; the folder must contain {expected}$"):
        read_imagenet_c(tmp_path)  # the benchmark's corruptions, the first of them first
    with pytest.raises(DatasetLayoutError, match=r"model was not trained on, e.g. \['n01', 'n02', 'n03'\]$"):  # three of four
        read_imagenet_c(tmp_path, ["n00"], corruptions=["fog"])
    with pytest.raises(DatasetLayoutError, match=rf"^ImageNet-C: folder .*absent not found; it must contain {expected}$"):
        read_imagenet_c(tmp_path / "absent")


@pytest.mark.parametrize("images", [12, 9])  # one more image than labels; as many, but not five blocks
def test_cifar10_c_arrays_of_the_wrong_length_are_refused(tmp_path, images):
    np.save(tmp_path / "labels.npy", np.zeros(images - 1 if images == 12 else images, np.int64))
    np.save(tmp_path / "fog.npy", np.zeros((images, 32, 32, 3), np.uint8))
    with pytest.raises(DatasetLayoutError, match=rf"^CIFAR-10-C: fog.npy holds {images} images for \d+ labels; expected 5 equal severity blocks"):
        read_cifar10_c(tmp_path, ["fog"])


def test_the_example_figure_shows_each_corruption_by_row_and_severity_by_column_clean_first():
    """Titles on the first row only, the corruption's name beside each row, and each cell the image of its set at the
    index asked for, drawn on the full 0-255 scale (grey for one-channel images)."""
    grey = lambda value: np.full((2, 4, 4), value, dtype=np.uint8)  # two images a set: index 1 is drawn
    labels = np.zeros(2, dtype=np.int64)
    sets = {(name, severity): ImageRecords(labels=labels, images=grey(10 * severity + offset))
            for offset, name in enumerate(("gaussian_noise", "motion_blur")) for severity in (1, 3)}  # fmt: skip
    clean = np.full((4, 4), 200, dtype=np.uint8)
    figure = example_figure(clean, CorruptedSet("cifar10_c", sets, "generated"), index=1)
    axes = np.asarray(figure.axes).reshape(2, 3)
    assert [axis.get_title() for axis in axes[0]] == ["clean", "severity 1", "severity 3"]
    assert [axis.get_title() for axis in axes[1]] == ["", "", ""] and {axis.title.get_fontsize() for axis in axes[0]} == {8}
    assert [axis.get_ylabel() for axis in axes[:, 0]] == ["gaussian noise", "motion blur"] and axes[0, 1].get_ylabel() == ""
    shown = [[int(axis.get_images()[0].get_array()[0, 0]) for axis in row] for row in axes]
    assert shown == [[200, 10, 30], [200, 11, 31]]
    for axis in axes.flat:
        image = axis.get_images()[0]
        assert image.get_clim() == (0, 255) and image.get_cmap().name == "gray"
    assert figure.texts[0].get_text() == "cifar10_c (generated): test image 1"
    figure = example_figure(None, CorruptedSet("cifar10_c", {("fog", 2): ImageRecords(labels=labels[:1], images=np.zeros((1, 4, 4, 3), np.uint8))}, "released"))
    assert [axis.get_title() for axis in figure.axes] == ["severity 2"] and figure.axes[0].get_images()[0].get_cmap().name != "gray"


def test_the_example_figure_decodes_a_set_held_as_files(tmp_path):
    """Released ImageNet-C sets are files: the figure shows the decoded image at the index asked for."""
    paths = []
    for value in (40, 90):
        paths.append(tmp_path / f"{value}.png")
        Image.fromarray(np.full((4, 4, 3), value, np.uint8)).save(paths[-1])
    records = ImageRecords(labels=np.array([0, 0]), paths=paths)
    figure = example_figure(None, CorruptedSet("imagenet_c", {("fog", 1): records}, "released"), index=1)
    assert figure.axes[0].get_images()[0].get_array()[0, 0].tolist() == [90, 90, 90]
