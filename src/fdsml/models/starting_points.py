"""Starting points for fine-tuning: a pre-trained checkpoint's backbone, or random initialisation.

Fine-tuning keeps only the trunk (``backbone.*``) of a checkpoint and puts a fresh head for the
downstream task on it, so FDSL (classifier) and FDSML (embedding) checkpoints start on equal terms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from fdsml.config import ConfigError
from fdsml.errors import CheckpointError
from fdsml.models.backbones import check_overrides
from fdsml.models.backbones import require_backbone as require_known_backbone
from fdsml.models.checkpoint import load_checkpoint_file, recorded_model_config
from fdsml.models.network import EmbeddingModel, build_model
from fdsml.fingerprints import content_digest

BACKBONE_PREFIX = "backbone."
PRETRAINED = "pretrained_model"
"""A starting point's ``checkpoint`` naming the pre-training pipeline's output (a catalog input) rather than a file."""


@dataclass(frozen=True)
class StartingPoint:
    """``checkpoint: null`` trains from scratch on ``backbone``; otherwise the checkpoint's trunk is loaded.

    ``base_lr`` is this start's own fine-tuning rate (the task's ``optimizer.base_lr`` when null): starts
    fine-tune best at different rates, and a comparison at one shared rate favours the start it suits.
    """

    name: str
    checkpoint: str | None = None
    backbone: str = "resnet18"
    overrides: dict[str, Any] = field(default_factory=dict)
    base_lr: float | None = None

    def __post_init__(self):
        if self.base_lr is not None and not self.base_lr > 0:
            raise ConfigError(f"base_lr: must be a positive learning rate (or null: the task's optimizer.base_lr), got {self.base_lr!r}")


def check_start_settings(starts: tuple[StartingPoint, ...], key: str) -> None:
    """Each start of the list ``key`` names a known backbone, and its ``overrides`` are arguments that backbone's timm
    model takes (a ConfigError naming the full key and the closest one otherwise)."""
    for index, start in enumerate(starts):
        require_known_backbone(f"{key}[{index}].backbone", start.backbone)
        check_overrides(start.backbone, start.overrides, f"{key}[{index}].overrides")


def start_payload(start: StartingPoint, pretrained: dict | None = None) -> dict | None:
    """The model file ``start`` begins from: ``pretrained`` (the pipeline's output) for ``PRETRAINED``, None from scratch."""
    if start.checkpoint == PRETRAINED:
        if pretrained is None:
            raise ValueError(
                f"starting point {start.name!r}: checkpoint {PRETRAINED} is the pre-training pipeline's output; "
                "pass its model file, or run `kedro run --pipelines=pretrain` first"
            )
        return pretrained
    return load_checkpoint_file(start.checkpoint) if start.checkpoint else None


def trunk_state_dict(payload: dict) -> dict[str, torch.Tensor]:
    """The trunk's weights in a model file, keyed as the backbone names them: all a start takes from it."""
    return {k[len(BACKBONE_PREFIX) :]: v for k, v in payload["state_dict"].items() if k.startswith(BACKBONE_PREFIX)}


def trunk_digest(payload: dict | None) -> str:
    """The content digest of the trunk a start loads ("" from scratch): it enters fine-tuning fingerprints."""
    return content_digest(trunk_state_dict(payload)) if payload is not None else ""


def start_record(checkpoint: str | None, payload: dict | None) -> dict[str, str | None]:
    """What a result records of the model it began from: the start's ``checkpoint`` (None from scratch) and its trunk's
    content digest, so a later stage shows it only beside that model (:mod:`fdsml.reporting.provenance`)."""
    return {"checkpoint": checkpoint, "trunk_digest": trunk_digest(payload)}


def recorded_start(fine_tuned: dict) -> dict[str, str | None]:
    """The start record a fine-tuned model file keeps (``start_checkpoint``, ``start_trunk_digest`` in its metadata;
    None for a file written before fdsml recorded it)."""
    metadata = fine_tuned["metadata"]
    return {"checkpoint": metadata.get("start_checkpoint"), "trunk_digest": metadata.get("start_trunk_digest")}


def require_backbone(start: StartingPoint, held: str, source: str) -> None:
    """Raise CheckpointError when ``source`` (a checkpoint, or the pre-training that writes it) holds another
    backbone than ``start`` names: a comparison never silently mixes architectures."""
    if held != start.backbone:
        raise CheckpointError(
            f"starting point {start.name!r}: {source} holds a {held} backbone, but backbone: {start.backbone} was "
            f"asked for; set the starting point's backbone to {held} or pick a matching checkpoint"
        )


def build_from_start(
    start: StartingPoint, *, seed: int, img_size: int | None = None, payload: dict | None = None, **head: Any
) -> EmbeddingModel:
    """A model with a new ``head`` (``build_model`` keywords) whose trunk comes from ``start``.

    ``payload`` is the model file the start begins from, read with :func:`start_payload` when not given.
    Raises CheckpointError (a ValueError) when the checkpoint's backbone is not the one ``start`` names.
    """
    if payload is None:
        payload = start_payload(start)
    if payload is not None:
        require_backbone(start, payload["model"]["name"], start.checkpoint)
    overrides = dict(start.overrides)
    if payload is not None:
        stored = recorded_model_config(payload)  # its normalisation travels on with the trunk
        overrides = {k: v for k, v in stored.items() if k not in _SPEC_KEYS} | overrides
        img_size = stored["img_size"] if img_size is None else img_size
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_model(start.backbone, img_size=img_size, **head, **overrides)
    if payload is not None:
        model.backbone.load_state_dict(trunk_state_dict(payload))
    return model


_SPEC_KEYS = {"name", "head", "num_classes", "embedding_dim", "hidden_dim", "img_size", "in_chans"}
