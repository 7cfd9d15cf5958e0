"""What a pre-training objective is to the rest of pre-training: an :class:`ObjectiveRecipe`, registered by name.

A recipe describes, not trains: the dataclass of its settings (``pretrain.<name>``), the batches
it needs, the triplets it mines per batch, the model head it trains and the objective the loop
calls (``objective(model, batch, step) -> (loss, parts)``, :mod:`fdsml.training.objectives`).
Pre-training, its plan and its checks ask the recipe ``pretrain.objective`` names; none of them
branches on a name. The registry finds its recipes itself (:func:`fdsml.plugins.discover`): every module
of this package, and every entry point of group ``fdsml.objectives``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from torch import nn

from fdsml import fingerprints, plugins
from fdsml.config import ConfigError
from fdsml.training.pretrain_objectives.triplet_settings import TripletLossSettings

BatchChoice = Literal["shuffled", "class_balanced"]
"""An objective's ``batches`` key: plain shuffled batches of P x K images, or P x K class-balanced ones."""


@dataclass(frozen=True)
class Batches:
    """How an objective's batches are formed: plain ``shuffled`` ones (each image once per epoch), P x K
    ``class_balanced`` ones, or ``explicit_triplets`` laid out ``[anchors | first | second]`` from
    candidates of ``triplet_filter``."""

    kind: Literal["shuffled", "class_balanced", "explicit_triplets"]
    triplet_filter: str | None = None


@dataclass(frozen=True)
class BatchNeed:
    """A batch must hold ``at_least`` of ``key`` (``pretrain.data.<key>``) for the objective to find what it trains on;
    ``reason`` says why, in the error that names the key."""

    key: Literal["classes_per_batch", "instances_per_class"]
    at_least: int
    reason: str


class ObjectiveRecipe:
    """One pre-training objective as configured; subclass it in a module of this package and decorate it with
    :func:`register_objective`. ``name`` is ``pretrain.objective``'s value and the settings' section."""

    name: ClassVar[str]
    settings: ClassVar[type]
    head: ClassVar[Literal["classifier", "embedding"]] = "embedding"
    """What the model outputs: logits over the training classes, or an embedding (a class head of the objective's own
    stays outside the model, so its checkpoints, validation, export and fine-tuning see an embedding model)."""

    def batches(self, settings: Any) -> Batches:
        return Batches("class_balanced")

    def batch_triplets(self, settings: Any) -> tuple[str, Any] | None:
        """``(filter, TripletLossSettings)`` of the triplet term mined in every batch (None: none is mined)."""
        return None

    def batch_needs(self, settings: Any) -> tuple[BatchNeed, ...]:
        """What a P x K batch must hold: by default what the mined triplets' candidate filter needs."""
        mined = self.batch_triplets(settings)
        if mined is None or self.batches(settings).kind == "shuffled":
            return ()
        filter_name = mined[0]
        instances = {"each": 2, "same": 3}.get(filter_name, 1)
        needs = [
            BatchNeed("instances_per_class", instances, f"filter {filter_name!r} needs at least {instances} instances of the anchor's class per batch")
        ]
        if filter_name == "each":
            needs.append(BatchNeed("classes_per_batch", 2, f"filter {filter_name!r} needs at least 2 classes per batch"))
        return tuple(needs)

    def normalized_distances(self, settings: Any) -> bool:
        """Whether the objective compares L2-normalised embeddings (the held-out validation measures distances as it
        trains them): a triplet objective as its settings say; the others' features (cross-entropy's, the pair loss's
        cosine similarities) are read normalised, as retrieval reads them."""
        return settings.normalize_embeddings if isinstance(settings, TripletLossSettings) else True

    def build(self, settings: Any, *, num_classes: int, embedding_dim: int, seed: int) -> nn.Module:
        """The objective the loop calls; ``num_classes`` training classes, ``embedding_dim`` the model's output width."""
        raise NotImplementedError

    def describe(self, settings: Any) -> dict[str, Any]:
        """What the model file records of the objective beside its name (the model card reads it)."""
        return {"filter": None, "mode": None}


_RECIPES: dict[str, ObjectiveRecipe] = {}
PACKAGE = "fdsml.training.pretrain_objectives"
ENTRY_POINTS = "fdsml.objectives"


def _recipes() -> dict[str, ObjectiveRecipe]:
    plugins.discover(PACKAGE, ENTRY_POINTS)
    return _RECIPES


def register_objective(cls: type[ObjectiveRecipe]) -> type[ObjectiveRecipe]:
    """Decorator: make the recipe selectable as ``pretrain.objective: <cls.name>``; a second of the same name is refused."""
    if cls.name in _RECIPES:
        raise ValueError(f"a pre-training objective named {cls.name!r} is already registered")
    _RECIPES[cls.name] = cls()
    return cls


def known_objectives() -> tuple[str, ...]:
    return tuple(sorted(_recipes()))


def objective_recipe(name: str, key: str = "objective") -> ObjectiveRecipe:
    """The recipe registered as ``name``; an unknown name raises ``ConfigError`` naming ``key`` and the known ones."""
    try:
        return _recipes()[name]
    except (KeyError, TypeError):
        raise ConfigError(f"{key}: {name!r} is not accepted; choose one of {', '.join(map(repr, known_objectives()))}") from None


def with_objective_sections(cls: type) -> type:
    """Class decorator on pre-training's configuration dataclass: one more field per registered objective, named
    after it and holding its settings (its defaults where the configuration has no block), so that
    ``pretrain.<name>.<key>`` is parsed and checked like any other key, whichever objective is selected; only the
    selected objective's section defines a run (its fingerprint reads no other)."""
    sections: list[tuple[str, type, Any]] = [
        (name, recipe.settings, fingerprints.defining_when(_selects(name), default_factory=recipe.settings))
        for name, recipe in sorted(_recipes().items())
    ]
    namespace = {"__doc__": cls.__doc__, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    return dataclasses.make_dataclass(cls.__name__, sections, bases=(cls,), frozen=True, namespace=namespace)


def _selects(name: str):
    """Whether a pre-training configuration selects objective ``name``."""
    return lambda config: config.objective == name
