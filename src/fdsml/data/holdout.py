"""The held-out split of a codes table: rows pre-training never sees, for its validation.

Two parts are held out: some whole classes (retrieval among fractal classes the model never
saw) and, in every remaining class, one region of its descriptor space (unseen instances of known
classes). Instances of a class are perturbations of one code, so a random instance always has
near-duplicates among the others (a factor 0.001 apart): held out one by one, they would measure
memorisation. Instead each training class holds out the instances nearest one of them (drawn) in
descriptor space, and the instances closer than ``gap`` times the class's median pairwise
descriptor distance to any held-out one (exact duplicates always) are used by neither part (the
guard): no training instance lies that close to a held-out one.

The split is a pure function of the table's ``class_id`` and ``psi`` columns, the settings and
the seed (drawn from its own stream, no global state), so the stored table never changes: the
split is part of the table's definition (``fractals.holdout``) without being written into it.
Any table with those columns and one row per instance splits alike, whatever formula family
made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from scipy.spatial.distance import cdist, pdist
from torch.utils.data import Dataset

from fdsml.config import ConfigError
from fdsml.data.epoch_items import collated
from fdsml.seeds import generator



@dataclass(frozen=True)
class HoldoutSettings:
    """``fractals.holdout``: the fraction of classes, and of each remaining class's instances (one region of
    its descriptor space), never trained on; ``gap``: the guard around the held-out region, in units of
    the class's median pairwise descriptor distance.

    A positive fraction holds out at least one class (instance), and always leaves at least one
    to train on; 0 disables that part.
    """

    instance_fraction: float = 0.0
    class_fraction: float = 0.0
    gap: float = 0.1

    def __post_init__(self):
        for key in ("instance_fraction", "class_fraction"):
            value = getattr(self, key)
            if not 0 <= value < 1:
                raise ConfigError(f"fractals.holdout.{key}: must lie in [0, 1) (0 disables), got {value!r}")
        if not 0 <= self.gap < 1:
            raise ConfigError(f"fractals.holdout.gap: must lie in [0, 1) (of the median distance), got {self.gap!r}")


def _held_count(fraction: float, total: int, key: str) -> int:
    """How many of ``total`` items a fraction holds out: rounded, at least one when positive, never all."""
    if fraction == 0:
        return 0
    count = max(1, int(round(fraction * total)))
    if count >= total:
        raise ConfigError(
            f"fractals.holdout.{key}: {fraction} of {total} would leave nothing to train on; lower it or set it to 0"
        )
    return count


@dataclass(frozen=True)
class HoldoutSplit:
    """Row positions (into the table) of each part, ascending, and the classes trained on.

    ``heldout_instances`` are the unseen regions of the training classes; ``guard`` the rows of
    neither part around them. ``training_classes`` is sorted: a classifier trained on the training
    rows has output ``i`` for class ``training_classes[i]`` (:meth:`training_labels`).
    """

    training: np.ndarray
    heldout_instances: np.ndarray
    heldout_classes: np.ndarray
    training_classes: np.ndarray
    guard: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    @property
    def heldout(self) -> np.ndarray:
        """Every held-out row (both parts), ascending."""
        return np.sort(np.concatenate([self.heldout_instances, self.heldout_classes]))

    def training_labels(self, class_ids: np.ndarray) -> np.ndarray:
        """``class_ids`` of training classes as the classifier's outputs 0..C-1 (identity for classes 0..C-1)."""
        class_ids = np.asarray(class_ids)
        positions = np.searchsorted(self.training_classes, class_ids)
        if not np.array_equal(self.training_classes[np.minimum(positions, len(self.training_classes) - 1)], class_ids):
            raise ValueError("training_labels: a class id is not one of the training classes")
        return positions.astype(np.int64)


def median_distance(psi: np.ndarray) -> float:
    """The median pairwise descriptor distance of one class's instances (the gap's unit); 0 for one instance."""
    return float(np.median(pdist(psi))) if len(psi) > 1 else 0.0


def heldout_region(psi: np.ndarray, count: int, gap: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(held, guard)`` positions among one class's descriptors ``psi`` (N, D): the ``count`` instances
    nearest a drawn one, and the others within ``gap`` x :func:`median_distance` of any of them."""
    centre = psi[rng.integers(len(psi))]
    held = np.sort(np.argsort(np.linalg.norm(psi - centre, axis=1), kind="stable")[:count])
    near = cdist(psi[held], psi).min(axis=0) <= gap * median_distance(psi)  # exact duplicates even at gap 0
    near[held] = False
    return held, np.flatnonzero(near)


def training_rows_at_most(n_classes: int, per_class: int, settings: HoldoutSettings) -> int:
    """The rows :func:`split_table` leaves to train on, before the guard band: exact at ``gap`` 0 (bar
    exact duplicates), an upper bound otherwise (the guard is drawn from the table's descriptors)."""
    kept_classes = n_classes - _held_count(settings.class_fraction, n_classes, "class_fraction")
    return kept_classes * (per_class - _held_count(settings.instance_fraction, per_class, "instance_fraction"))


def split_table(table: pd.DataFrame, settings: HoldoutSettings, seed: int) -> HoldoutSplit:
    """Hold out ``class_fraction`` of the classes, then a region of ``instance_fraction`` of each remaining
    class's rows with its guard (:func:`heldout_region`).

    Draws from stream ``holdout_split`` of ``seed`` (:mod:`fdsml.seeds`): the same table, settings and
    seed give the same split.
    """
    for column in ("class_id", "psi"):
        if column not in table.columns:
            raise KeyError(f"the codes table lacks column {column}, which the held-out split needs")
    class_ids = table["class_id"].to_numpy()
    classes = np.unique(class_ids)
    rng = generator(seed, "holdout_split")
    held_classes = np.sort(rng.choice(classes, _held_count(settings.class_fraction, len(classes), "class_fraction"), replace=False))
    training_classes = np.setdiff1d(classes, held_classes)
    held_instances, guard = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)]
    for label in training_classes if settings.instance_fraction else ():
        rows = np.flatnonzero(class_ids == label)
        count = _held_count(settings.instance_fraction, len(rows), "instance_fraction")
        held, near = heldout_region(np.stack(table["psi"].iloc[rows].to_list()).astype(np.float64), count, settings.gap, rng)
        if len(held) + len(near) == len(rows):
            raise ConfigError(
                f"fractals.holdout.gap: {settings.gap} leaves class {label} nothing to train on "
                f"({len(held)} held out, {len(near)} in the guard); lower it or fractals.holdout.instance_fraction"
            )
        held_instances.append(rows[held])
        guard.append(rows[near])
    heldout_instances = np.sort(np.concatenate(held_instances)).astype(np.int64)
    guard_rows = np.sort(np.concatenate(guard)).astype(np.int64)
    heldout_classes = np.flatnonzero(np.isin(class_ids, held_classes)).astype(np.int64)
    unused = np.concatenate([heldout_instances, heldout_classes, guard_rows])
    training = np.setdiff1d(np.arange(len(table)), unused).astype(np.int64)
    return HoldoutSplit(training, heldout_instances, heldout_classes, training_classes, guard_rows)


class TrainingRows(Dataset):
    """The training rows of a formula family's dataset, labelled with the classifier's outputs 0..C-1.

    Items keep their table row as ``index``, so fresh rendering noise (a function of the row)
    is the same with or without a held-out split; ``set_epoch`` reaches the wrapped dataset.
    """

    def __init__(self, dataset, split: HoldoutSplit):
        self.dataset = dataset
        self.rows = split.training
        self.labels = split.training_labels(np.asarray(dataset.labels)[self.rows])

    @property
    def psi(self) -> np.ndarray:
        return np.asarray(self.dataset.psi)[self.rows]

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def model_input(self, images):
        """The wrapped dataset's conversion of shipped images into the model's input."""
        return self.dataset.model_input(images)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        item = self.dataset[int(self.rows[int(index)])]
        item["label"] = int(self.labels[int(index)])
        return item

    def collated_items(self, indices: np.ndarray) -> dict:
        """Items ``indices`` collated: the wrapped dataset's batch of their rows, relabelled."""
        indices = np.asarray(indices, dtype=np.int64)
        batch = collated(self.dataset, self.rows[indices])
        batch["label"] = torch.from_numpy(self.labels[indices])
        return batch
