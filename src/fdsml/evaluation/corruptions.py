"""Common corruptions (docs/method.md §5.5): the benchmarks' group tables, seeded generation, released-set readers.

* **Groups.** :data:`CORRUPTION_GROUPS` lists, per benchmark, the corruption types of each
  group as docs/method.md §5.5 does (CIFAR-10-C adds speckle noise, Gaussian blur, spatter and saturate
  to ImageNet-C's fifteen; elastic transform is its own "geometric" group).
  :func:`group_errors` averages a model's error over severities, then over the types of each
  group; ``mean`` is the mean over every corruption type of the benchmark.
* **Generation.** When the released files are absent, :func:`corrupt_image` applies the
  ``imagecorruptions`` package (the maintained ``imagecorruptions-imaug`` fork; severities are
  ImageNet-C's, harsher than CIFAR-10-C's on 32 x 32 images). Each (corruption, severity,
  image) gets its own seed from ``numpy.random.SeedSequence``, so any image can be rebuilt
  alone. The package draws from numpy's *global* generator (and, for glass blur and impulse
  noise, from a ``seed`` argument): :func:`seeded_global_numpy` seeds the global generator
  for one call and restores its previous state afterwards, so nothing outside is disturbed.
  That makes generation deterministic but not thread-safe: corrupt from one thread only.
* **Released sets.** :func:`read_cifar10_c` reads ``<corruption>.npy`` (5 severities x N images,
  severity 1 first) and ``labels.npy``; :func:`read_imagenet_c` reads
  ``<corruption>/<severity>/<class>/*.JPEG``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fdsml.data.image_records import decode_image
from fdsml.data.layout import DatasetLayoutError, require_folder
from fdsml.data.retrieval_datasets import ImageRecords
from fdsml.seeds import generator, stream

logger = logging.getLogger(__name__)

SEVERITIES = (1, 2, 3, 4, 5)

# The package's 19 corruptions in its own order; the position keys each one's seeds, so it never changes.
CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg_compression",
    "speckle_noise", "gaussian_blur", "spatter", "saturate",
)  # fmt: skip

CORRUPTION_GROUPS: dict[str, dict[str, tuple[str, ...]]] = {
    "cifar10_c": {
        "noise": ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise"),
        "blur": ("defocus_blur", "gaussian_blur", "glass_blur", "motion_blur", "zoom_blur"),
        "weather": ("snow", "frost", "fog", "spatter"),
        "digital": ("brightness", "contrast", "saturate", "pixelate", "jpeg_compression"),
        "geometric": ("elastic_transform",),
    },
    "imagenet_c": {
        "noise": ("gaussian_noise", "shot_noise", "impulse_noise"),
        "blur": ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur"),
        "weather": ("snow", "frost", "fog"),
        "digital": ("brightness", "contrast", "pixelate", "jpeg_compression"),
        "geometric": ("elastic_transform",),
    },
}

# Corruptions whose randomness the package takes from a ``seed`` argument rather than the global generator.
_SEED_ARGUMENT = frozenset({"glass_blur", "impulse_noise"})
MIN_SIZE = 32  # the package refuses smaller images


def benchmark_corruptions(benchmark: str) -> tuple[str, ...]:
    """Every corruption type of ``benchmark``, group after group."""
    return tuple(name for names in _groups(benchmark).values() for name in names)


def _groups(benchmark: str) -> dict[str, tuple[str, ...]]:
    if benchmark not in CORRUPTION_GROUPS:
        raise KeyError(f"unknown corruption benchmark {benchmark!r}; choose one of {', '.join(CORRUPTION_GROUPS)}")
    return CORRUPTION_GROUPS[benchmark]


# --- group averaging ----------------------------------------------------------------------------


def group_errors(error_table: pd.DataFrame, benchmark: str, *, by: str = "model") -> pd.DataFrame:
    """Per-group mean error and the mean over all corruption types, one row per value of ``by``.

    ``error_table`` has columns ``by``, ``corruption``, ``severity`` and ``error``. A type's
    error is its mean over the severities present; a group's error is the mean over its types;
    ``mean`` is the mean over every type of the benchmark (not of the group means). A type of
    the benchmark missing from the table is an error, naming it.
    """
    groups = _groups(benchmark)
    per_type = error_table.groupby([by, "corruption"])["error"].mean().unstack("corruption")
    missing = [name for name in benchmark_corruptions(benchmark) if name not in per_type.columns]
    if missing:
        raise KeyError(f"{benchmark}: the error table lacks corruption type(s) {', '.join(missing)}")
    result = pd.DataFrame({group: per_type[list(names)].mean(axis=1) for group, names in groups.items()})
    result["mean"] = per_type[list(benchmark_corruptions(benchmark))].mean(axis=1)
    return result


# --- generation ------------------------------------------------------------------------------------


def corruption_seed(seed: int, corruption: str, severity: int, index: int) -> int:
    """The 32-bit seed of image ``index`` under ``corruption`` at ``severity``, spawned from ``seed``."""
    sequence = stream(seed, "corruption", CORRUPTIONS.index(corruption), severity, index)
    return int(sequence.generate_state(1, dtype=np.uint32)[0])


@contextlib.contextmanager
def seeded_global_numpy(seed: int) -> Iterator[None]:
    """Seed numpy's global generator for the duration of the block, then put its previous state back."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def corrupt_image(image: np.ndarray, corruption: str, severity: int, seed: int) -> np.ndarray:
    """``image`` (uint8 (H, W) or (H, W, 3), H and W >= 32) under ``corruption`` at ``severity``; uint8 (H, W, 3)."""
    from imagecorruptions import corrupt

    if corruption not in CORRUPTIONS:
        raise KeyError(f"unknown corruption {corruption!r}; choose one of {', '.join(CORRUPTIONS)}")
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity}")
    if min(image.shape[:2]) < MIN_SIZE:
        raise ValueError(f"images must be at least {MIN_SIZE} x {MIN_SIZE} to corrupt, got {image.shape[:2]}; resize them first")
    extra = {"seed": seed} if corruption in _SEED_ARGUMENT else {}
    with seeded_global_numpy(seed):
        return corrupt(np.ascontiguousarray(image), severity=severity, corruption_name=corruption, **extra)


def corrupt_images(images: np.ndarray, corruption: str, severity: int, seed: int) -> np.ndarray:
    """Every image of ``images`` (N, H, W[, 3]) under one corruption and severity: uint8 (N, H, W, 3)."""
    seeds = [corruption_seed(seed, corruption, severity, i) for i in range(len(images))]
    return np.stack([corrupt_image(image, corruption, severity, s) for image, s in zip(images, seeds)])


def clean_test_images(
    records: ImageRecords, size: int, crop_fraction: float = 1.0, *, max_images: int | None = None, seed: int = 0
) -> ImageRecords:
    """The test images to corrupt, in memory as uint8 (N, size, size, 3): each one's test view.

    The view is classification's (:func:`fdsml.data.image_records.test_view`: short side resized
    to ``size / crop_fraction``, centre square kept), so clean and corrupted images are seen as
    the classifier's test images are. Grey is replicated to three channels. ``max_images``
    keeps a random subset (drawn from ``seed``, in the original order).
    """
    from fdsml.data.image_records import load_image, test_view

    if max_images is not None and max_images < len(records):
        rng = generator(seed, "corruption_subset")
        records = records.subset(np.sort(rng.choice(len(records), max_images, replace=False)))
    images = [test_view(load_image(records, i), size, crop_fraction).permute(1, 2, 0).numpy() for i in range(len(records))]
    return ImageRecords(labels=records.labels, images=np.stack(images))


# --- corrupted sets ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CorruptedSet:
    """A test set under corruptions: ``sets[(corruption, severity)]`` are the images with their labels."""

    benchmark: str
    sets: dict[tuple[str, int], ImageRecords]
    source: str  # "released" or "generated"

    @property
    def corruptions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for name, _ in self.sets))


_CIFAR10_C_FILES = "labels.npy and one <corruption>.npy per corruption (5 severities x N images, severity 1 first)"


def read_cifar10_c(root: str | Path, corruptions: Sequence[str] | None = None) -> CorruptedSet:
    """The released CIFAR-10-C arrays, memory-mapped (nothing is read until used)."""
    root = require_folder(Path(root).expanduser(), "CIFAR-10-C", _CIFAR10_C_FILES)
    labels_file = root / "labels.npy"
    if not labels_file.is_file():
        raise DatasetLayoutError(f"CIFAR-10-C: labels.npy not found in {root}; it must contain {_CIFAR10_C_FILES}")
    labels = np.load(labels_file)
    sets = {}
    for corruption in corruptions or benchmark_corruptions("cifar10_c"):
        path = root / f"{corruption}.npy"
        if not path.is_file():
            raise DatasetLayoutError(f"CIFAR-10-C: {path.name} not found in {root}; it must contain {_CIFAR10_C_FILES}")
        images = np.load(path, mmap_mode="r")
        if len(images) != len(labels) or len(images) % len(SEVERITIES):
            raise DatasetLayoutError(
                f"CIFAR-10-C: {path.name} holds {len(images)} images for {len(labels)} labels; expected 5 equal severity blocks"
            )
        block = len(images) // len(SEVERITIES)
        for position, severity in enumerate(SEVERITIES):
            part = slice(position * block, (position + 1) * block)
            sets[(corruption, severity)] = ImageRecords(labels=labels[part], images=images[part])
    return CorruptedSet("cifar10_c", sets, "released")


_IMAGENET_C_FILES = "<corruption>/<severity 1..5>/<class wnid>/*.JPEG"


def read_imagenet_c(
    root: str | Path, class_names: Sequence[str] | None = None, corruptions: Sequence[str] | None = None
) -> CorruptedSet:
    """The released ImageNet-C folders; labels are positions in ``class_names`` (the training classes' order).

    Without ``class_names`` each set's own sorted class folders number the labels (enough for pictures).
    """
    root = require_folder(Path(root).expanduser(), "ImageNet-C", _IMAGENET_C_FILES)
    sets = {}
    for corruption in corruptions or benchmark_corruptions("imagenet_c"):
        for severity in SEVERITIES:
            folder = root / corruption / str(severity)
            if not folder.is_dir():
                raise DatasetLayoutError(f"ImageNet-C: {folder} not found; the folder must contain {_IMAGENET_C_FILES}")
            classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
            index = {name: i for i, name in enumerate(class_names if class_names is not None else classes)}
            unknown = [c for c in classes if c not in index]
            if unknown:
                raise DatasetLayoutError(f"ImageNet-C: {folder} has classes the model was not trained on, e.g. {unknown[:3]}")
            paths, labels = [], []
            for name in classes:
                files = sorted(p for p in (folder / name).iterdir() if p.suffix.lower() in (".jpeg", ".jpg", ".png"))
                paths += files
                labels += [index[name]] * len(files)
            if not paths:
                raise DatasetLayoutError(f"ImageNet-C: {folder} holds no images; expected {_IMAGENET_C_FILES}")
            sets[(corruption, severity)] = ImageRecords(labels=np.array(labels), paths=paths)
    return CorruptedSet("imagenet_c", sets, "released")


def generate_corrupted_arrays(
    images: np.ndarray, corruptions: Sequence[str], seed: int, severities: Sequence[int] = SEVERITIES
) -> Iterator[tuple[str, int, np.ndarray]]:
    """``(corruption, severity, corrupted images)`` for every pair, corruption-major, lazily."""
    from tqdm.auto import tqdm

    pairs = [(c, s) for c in corruptions for s in severities]
    for corruption, severity in tqdm(pairs, desc="corrupt", unit="set"):
        yield corruption, severity, corrupt_images(images, corruption, severity, seed)


def error_table(errors: Mapping[str, Mapping[tuple[str, int], float]]) -> pd.DataFrame:
    """``{model: {(corruption, severity): error}}`` as the long table :func:`group_errors` reads."""
    rows = [
        {"model": model, "corruption": corruption, "severity": severity, "error": error}
        for model, per_set in errors.items()
        for (corruption, severity), error in per_set.items()
    ]
    return pd.DataFrame(rows, columns=["model", "corruption", "severity", "error"])


# --- a generated set as array shards, and back -------------------------------------------------------

CLEAN = "clean"


def shard_keys(corruptions: Sequence[str], severities: Sequence[int] = SEVERITIES) -> list[str]:
    """The order of a stored generated set's shards: the clean images, then ``<corruption>/<severity>``."""
    return [CLEAN, *(f"{c}/{s}" for c in corruptions for s in severities)]


def generated_shards(
    clean: ImageRecords, corruptions: Sequence[str], seed: int, severities: Sequence[int] = SEVERITIES
) -> Iterator[np.ndarray]:
    """The clean images, then each corrupted copy in :func:`shard_keys` order (lazily: one set in memory at a time)."""
    yield clean.images
    for _, _, images in generate_corrupted_arrays(clean.images, corruptions, seed, severities):
        yield images


def stored_sets(
    keys: Sequence[str], shards: Sequence[np.ndarray], labels: np.ndarray, benchmark: str
) -> tuple[ImageRecords, CorruptedSet]:
    """The clean records and the corrupted set from stored shards laid out as :func:`shard_keys` says."""
    if len(keys) != len(shards) or keys[:1] != [CLEAN]:
        raise ValueError(f"stored corrupted set: {len(shards)} shards for {len(keys)} keys, the clean images first")
    records = {key: ImageRecords(labels=labels, images=shard) for key, shard in zip(keys, shards)}
    sets = {}
    for key in keys[1:]:
        corruption, _, severity = key.rpartition("/")
        sets[(corruption, int(severity))] = records[key]
    return records[CLEAN], CorruptedSet(benchmark, sets, "generated")


def example_figure(clean_image: np.ndarray | None, corrupted: CorruptedSet, index: int = 0):
    """One image under every corruption (rows) and severity (columns), the clean image first when given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    severities = sorted({s for _, s in corrupted.sets})
    columns = [None, *severities] if clean_image is not None else severities
    rows = corrupted.corruptions
    figure, axes = plt.subplots(len(rows), len(columns), figsize=(1.2 * len(columns) + 1.5, 1.2 * len(rows)), squeeze=False)
    for r, corruption in enumerate(rows):
        for c, severity in enumerate(columns):
            axis = axes[r, c]
            image = clean_image if severity is None else _image_at(corrupted.sets[(corruption, severity)], index)
            axis.imshow(image, cmap="gray" if image.ndim == 2 else None, vmin=0, vmax=255)
            axis.set_xticks([])
            axis.set_yticks([])
            if r == 0:
                axis.set_title("clean" if severity is None else f"severity {severity}", fontsize=8)
            if c == 0:
                axis.set_ylabel(corruption.replace("_", " "), fontsize=8, rotation=0, ha="right", va="center")
    figure.suptitle(f"{corrupted.benchmark} ({corrupted.source}): test image {index}", fontsize=10)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.4 / figure.get_figheight()))
    return figure


def _image_at(records: ImageRecords, index: int) -> np.ndarray:
    if records.images is not None:
        return np.asarray(records.images[index])
    return decode_image(records.paths[index])
