"""Held-out validation during pre-training: does the model learn what pre-training asks, and does it transfer?

The training loop calls a :class:`PretrainValidation` every ``every`` steps and at the end. It
scores the model on rows of the codes table never trained on (:mod:`fdsml.data.holdout`),
rendered once with the table's own seeds (fixed noise) and kept for the run, as are the probe's
images in their test view (decoded once); each validation embeds both in one pass:

* ``val_unseen_agreement_<filter>``: on a fixed, seeded set of held-out triplets per candidate
  filter (drawn as the explicit sampler draws them, among the unseen regions of training classes
  and the unseen classes), the fraction whose representation distances order the two candidates
  as the descriptor distance does: the quantity PA-Triplet optimises;
* ``val_unseen_region_top1`` (cross-entropy models): top-1 accuracy on the held-out regions of the
  training classes (instances no training instance lies near, :mod:`fdsml.data.holdout`);
* ``val_unseen_class_recall_at_1``: k-NN Recall@1 among the held-out classes (retrieval of unseen fractal classes);
* ``val_probe_recall_at_1``: the frozen trunk's Recall@1 on a real retrieval dataset (:mod:`fdsml.evaluation.frozen_probe`);
* ``validation_s``: the seconds the validation took (its cost against the step time).

Each metric comes with its binomial standard error over the items it scored, ``se_<metric>`` (the
triplets, the images, the queries with another image of their class), so a change between two
validations is read against its noise.

The representation is what each objective shapes: PA-Triplet's output embedding, FDSL's pooled
trunk features (its output is class logits of the training classes, meaningless for unseen
ones). The agreement measures Euclidean distances in the space the objective trained: between
L2-normalised vectors, or raw ones for a triplet loss trained with ``normalize_embeddings: false``
(``normalize``; the two can order a triplet differently); the unseen-class Recall@1 uses
normalised ones, as :func:`fdsml.evaluation.retrieval_metrics` does. Validation runs in eval mode under
``torch.random.fork_rng`` and restores every module's mode, so training is the same, byte for
byte, with validation on or off. Each validation logs one line: the metrics this run can have
(named as in the history), rounded; the history keeps every column of ``METRICS`` (NaN where none).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fdsml.data import RetrievalSplits
from fdsml.data.epoch_items import collated
from fdsml.data.holdout import HoldoutSplit
from fdsml.evaluation.classification import topk_accuracy
from fdsml.evaluation.embedding import trunk_autocast
from fdsml.evaluation.noise import binomial_se
from fdsml.evaluation.retrieval import retrieval_scores
from fdsml.evaluation.validation_settings import ValidationSettings
from fdsml.ifs.descriptor import descriptor_distance
from fdsml.losses.candidates import FILTERS, TripletPools, first_is_positive
from fdsml.seeds import generator

logger = logging.getLogger(__name__)

METRICS = (
    *(f"val_unseen_agreement_{name}" for name in FILTERS),
    "val_unseen_region_top1",
    "val_unseen_class_recall_at_1",
    "val_probe_recall_at_1",
)  # every validation reports them all (NaN where the data or the model has none), so history columns never vary
SE_PREFIX = "se_"
"""``se_<metric>``: a metric's binomial standard error over the items it scored (:func:`fdsml.evaluation.noise.binomial_se`)."""


@dataclass(frozen=True)
class HeldoutTriplets:
    """Fixed triplets (positions into the held-out images) and whether the descriptor puts candidate 1 first."""

    anchors: np.ndarray
    first: np.ndarray
    second: np.ndarray
    descriptor_first: np.ndarray

    @classmethod
    def draw(cls, class_ids: np.ndarray, psi: np.ndarray, filter_name: str, count: int, rng: np.random.Generator):
        """``count`` triplets of ``filter_name`` as pre-training's explicit sampler draws them; None when the
        held-out images cannot serve the filter (too few classes or instances)."""
        try:
            pools = TripletPools(class_ids, filter_name)
        except ValueError:
            return None
        if pools.eligible.size == 0:
            return None
        anchors, first, second = pools.sample(count, rng)
        descriptor_first = first_is_positive(
            descriptor_distance(psi[anchors], psi[first]), descriptor_distance(psi[anchors], psi[second])
        )
        return cls(anchors, first, second, np.asarray(descriptor_first))


def ordering_agreement(vectors: torch.Tensor, triplets: HeldoutTriplets, normalize: bool = True) -> float:
    """Fraction of ``triplets`` whose distances between ``vectors`` (L2-normalised first when ``normalize``)
    order the candidates as the descriptor does."""
    points = vectors.to(torch.float64)
    points = F.normalize(points, dim=1) if normalize else points
    anchors, first, second = (torch.from_numpy(part) for part in (triplets.anchors, triplets.first, triplets.second))
    by_vectors = first_is_positive((points[anchors] - points[first]).norm(dim=1), (points[anchors] - points[second]).norm(dim=1))
    return float((by_vectors.numpy() == triplets.descriptor_first).mean())


@contextlib.contextmanager
def evaluation_mode(model: nn.Module):
    """``model`` in eval mode, no gradients, the global RNGs untouched; every module's mode restored after."""
    modes = [(module, module.training) for module in model.modules()]
    device = next(model.parameters()).device
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
            model.eval()
            yield
    finally:
        for module, training in modes:
            module.training = training


def _subset(rows: np.ndarray, limit: int | None, rng: np.random.Generator) -> np.ndarray:
    """``rows``, or a seeded subset of ``limit`` of them in their order."""
    return rows if limit is None or len(rows) <= limit else np.sort(rng.choice(rows, limit, replace=False))


def probe_splits(splits: RetrievalSplits, max_images: int | None, seed: int) -> RetrievalSplits:
    """The probe's images: at most ``max_images`` test images (or queries, and gallery images), drawn once
    with ``seed``; scored by Recall@1, which any subset of two or more images supports."""
    rng = generator(seed, "validation_probe")

    def part(records):
        return None if records is None else records.subset(_subset(np.arange(len(records)), max_images, rng))

    return RetrievalSplits(
        splits.name, splits.train, (1,), test=part(splits.test), query=part(splits.query), gallery=part(splits.gallery)
    )


@dataclass(frozen=True)
class ProbeImages:
    """The probe's images in their test view, decoded once (uint8, N x 3 x S x S), and their labels.

    With a query set (In-Shop) the first ``queries`` images are the queries and the rest the
    gallery they search; otherwise (``queries`` 0) every image queries all the others.
    """

    images: torch.Tensor
    labels: np.ndarray
    queries: int

    @classmethod
    def read(cls, splits: RetrievalSplits, size: int, crop_fraction: float) -> ProbeImages:
        """Every probe image of ``splits`` in the test view at ``size`` (:func:`fdsml.data.image_records.test_view`)."""
        from fdsml.data.image_records import load_image, test_view  # torchvision's transforms: only when probing

        parts = (splits.query, splits.gallery) if splits.has_query_set else (splits.test,)
        views, labels = [], []
        for records in parts:
            views.extend(test_view(load_image(records, index), size, crop_fraction) for index in range(len(records)))
            labels.append(np.asarray(records.labels))
        return cls(torch.stack(views), np.concatenate(labels), len(splits.query) if splits.has_query_set else 0)

    def recall_at_1(self, features: torch.Tensor, seed: int) -> tuple[float, int]:
        """Recall@1 of ``features`` (one row per image, in order), as the retrieval metrics compute it, and the number of
        queries it scored (those with another image of their class to find)."""
        if not self.queries:
            found, hits = retrieval_scores(features, self.labels, ks=(1,), seed=seed, recall_only=True)
        else:
            cut = self.queries
            found, hits = retrieval_scores(
                features[cut:], self.labels[cut:], ks=(1,), query_embeddings=features[:cut], query_labels=self.labels[:cut],
                seed=seed, recall_only=True,
            )  # fmt: skip
        return found["recall@1"], len(hits)


def trunk_features(model: nn.Module, parts: list[torch.Tensor], batch_size: int) -> list[torch.Tensor]:
    """The model's trunk features (float32; the trunk under every evaluation's autocast,
    :func:`~fdsml.evaluation.embedding.trunk_autocast`) of each part's images (float, or uint8 read as [0, 1]), in
    batches of ``batch_size`` across the parts' boundaries: one pass when the parts' images are the same size."""
    if len({part.shape[1:] for part in parts}) > 1:
        return [features for part in parts for features in trunk_features(model, [part], batch_size)]
    device = next(model.parameters()).device
    sizes = [len(part) for part in parts]
    starts = np.cumsum([0, *sizes])
    features = []
    for first in range(0, int(starts[-1]), batch_size):
        last = min(first + batch_size, int(starts[-1]))
        pieces = [part[max(first - start, 0) : max(last - start, 0)] for part, start in zip(parts, starts)]
        batch = torch.cat([piece.float() / 255.0 if piece.dtype == torch.uint8 else piece for piece in pieces])
        with trunk_autocast(device):
            features.append(model.features(batch.to(device)).float())
    return list(torch.cat(features).split(sizes))


def validation_line(step: int, result: dict[str, float], names: tuple[str, ...]) -> str:
    """One log line: the step, the seconds and ``names``' values rounded to 3 decimals, named as in the history."""
    metrics = ", ".join(f"{name} {result[name]:.3f}" for name in names)
    return f"validation at step {step} ({result['validation_s']:.1f} s): {metrics}"


class PretrainValidation:
    """The loop's validation hook: held-out images rendered once, triplets drawn once, the probe's images
    decoded once; metrics on call, from one embedding pass over all of them.

    ``dataset`` is the whole codes table as a fixed-noise FineFractalDB dataset (items by table
    row); ``split`` says which rows are held out. ``classifier``: the model outputs training-class
    logits (FDSL), scored by top-1 and represented by its trunk features. ``probe`` is the probe's
    retrieval dataset (None: no probe), of which ``settings.probe.max_images`` are read, at ``probe_image_size``.
    ``normalize``: the objective's distances are between L2-normalised embeddings (the agreement's too).
    ``available`` names the metrics this run can have (the others stay NaN in every row).
    """

    def __init__(
        self,
        settings: ValidationSettings,
        dataset,
        split: HoldoutSplit,
        *,
        classifier: bool,
        seed: int,
        normalize: bool = True,
        probe=None,
        probe_image_size: int | None = None,
    ):
        self.settings = settings
        self.classifier = classifier
        self.normalize = normalize
        self.seed = seed
        self.probe = (
            None
            if probe is None
            else ProbeImages.read(probe_splits(probe, settings.probe.max_images, seed), probe_image_size, settings.probe.crop_fraction)
        )
        rng = generator(seed, "validation_rows")
        instances = _subset(split.heldout_instances, settings.max_images, rng)
        classes = _subset(split.heldout_classes, settings.max_images, rng)
        rows = np.concatenate([instances, classes])
        self.images = dataset.model_input(collated(dataset, rows)["image"]) if len(rows) else None
        self.class_ids = np.asarray(dataset.labels)[rows]
        psi = np.asarray(dataset.psi, dtype=np.float64)[rows]
        self.instance_part = torch.arange(len(rows)) < len(instances)
        self.instance_labels = torch.from_numpy(split.training_labels(self.class_ids[: len(instances)]))
        self.triplets = {
            name: HeldoutTriplets.draw(self.class_ids, psi, name, settings.triplets, rng) for name in FILTERS
        }
        self.available = self._available()
        probed = "" if self.probe is None else f", {len(self.probe.labels)} {settings.probe.dataset} probe images"
        logger.info("Validation every %d steps: %d held-out images%s", settings.every, len(rows), probed)

    def _available(self) -> tuple[str, ...]:
        """The metrics of ``METRICS`` the held-out data, the objective and the probe allow, in that order."""
        unseen_classes = len(np.unique(self.class_ids[~self.instance_part.numpy()]))
        has = {f"val_unseen_agreement_{name}": triplets is not None for name, triplets in self.triplets.items()}
        has["val_unseen_region_top1"] = self.classifier and bool(self.instance_part.any())
        has["val_unseen_class_recall_at_1"] = unseen_classes >= 2
        has["val_probe_recall_at_1"] = self.probe is not None
        return tuple(name for name in METRICS if has[name])

    def due(self, step: int, total_steps: int) -> bool:
        """Every ``every`` steps and at the last one."""
        return self.settings.enabled and (step % self.settings.every == 0 or step == total_steps)

    def _embedded(self, model: nn.Module) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """(representation, model output) of every held-out image and the probe's trunk features, float32 on the CPU."""
        parts = [part for part in (self.images, None if self.probe is None else self.probe.images) if part is not None]
        features = trunk_features(model, parts, self.settings.batch_size) if parts else []
        heldout = features.pop(0) if self.images is not None else None
        probe = features.pop(0).float().cpu() if self.probe is not None else None
        if heldout is None:
            return None, None, probe
        outputs = torch.cat([model.head(batch) for batch in heldout.split(self.settings.batch_size)])
        represented = heldout if self.classifier else outputs
        return represented.float().cpu(), outputs.float().cpu(), probe

    def metrics(self, model: nn.Module) -> dict[str, float]:
        """Every metric of ``METRICS`` and its standard error (``se_<metric>``), NaN where the held-out data or the
        settings allow none (the model in eval mode)."""
        scored: dict[str, tuple[float, int]] = {}  # each measured metric: its value and the items it scored
        vectors, outputs, probe = self._embedded(model)
        if vectors is not None:
            for name, triplets in self.triplets.items():
                if triplets is not None:
                    agreement = ordering_agreement(vectors, triplets, self.normalize)
                    scored[f"val_unseen_agreement_{name}"] = agreement, len(triplets.anchors)
            if "val_unseen_region_top1" in self.available:
                labels = self.instance_labels
                scored["val_unseen_region_top1"] = topk_accuracy(outputs[self.instance_part], labels, (1,))[1], len(labels)
            unseen = (~self.instance_part).numpy()
            if "val_unseen_class_recall_at_1" in self.available:
                found, hits = retrieval_scores(vectors[unseen], self.class_ids[unseen], ks=(1,), seed=self.seed, recall_only=True)
                scored["val_unseen_class_recall_at_1"] = found["recall@1"], len(hits)
        if probe is not None:
            scored["val_probe_recall_at_1"] = self.probe.recall_at_1(probe, self.seed)
        result = dict.fromkeys((*METRICS, *(SE_PREFIX + name for name in METRICS)), float("nan"))
        for name, (value, count) in scored.items():
            result[name], result[SE_PREFIX + name] = value, binomial_se(value, count)
        return result

    def __call__(self, model: nn.Module, step: int) -> dict[str, float]:
        """The metrics at ``step`` and ``validation_s``, the seconds they took; the model and RNGs as they were."""
        started = time.perf_counter()
        with evaluation_mode(model):
            result = self.metrics(model)
        result["validation_s"] = time.perf_counter() - started
        logger.info(validation_line(step, result, self.available))
        return result
