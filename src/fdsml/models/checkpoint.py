"""Checkpoint files: written atomically, loaded with ``weights_only=True`` (no code runs on load).

One format for training state (resume) and for the models that pipelines hand each other. Each file's
content is recorded beside it when written and checked before it is loaded (:mod:`fdsml.integrity`):
a file swapped since is refused, whatever it says about itself.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import torch

from fdsml.atomic import atomic_path
from fdsml.errors import CheckpointError, MissingInputError
from fdsml.integrity import check_content, file_digest, record_content, recorded_digests
from fdsml.models.network import build_model, model_setting_keys

FORMAT = "fdsml-checkpoint/1"


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """Write ``payload`` (tensors, numbers, strings, lists, dicts) to ``path`` atomically, and record its content.

    The record accepts the old file and the new one until the new one is in place, so a run killed
    between the two writes leaves a file its record vouches for."""
    with atomic_path(path) as temporary:
        torch.save({"format": FORMAT, **payload}, temporary)
        written = file_digest(temporary)
        record_content(path, recorded_digests(path) | {written})
    record_content(path, {written})


def load_checkpoint_file(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`; refuse anything else by name."""
    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"no checkpoint at {path}: run the pre-training pipeline first (kedro run --pipelines=pretrain)")
    check_content(path)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"{path}: refused, it holds Python objects that are not plain data and could run code when loaded "
            f"({str(error).splitlines()[0]}); use a checkpoint written by fdsml"
        ) from None
    except (RuntimeError, EOFError, OSError) as error:
        raise CheckpointError(
            f"{path}: cannot be read, it is truncated or corrupt ({str(error).splitlines()[0]}); delete it and run "
            "the pipeline that writes it again, or point to another checkpoint"
        ) from error
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an fdsml checkpoint (expected format {FORMAT!r}); use a file written by fdsml")
    _check_model_settings(path, payload.get("model"))
    return payload


def _check_model_settings(path: Path, settings: Any) -> None:
    """A model file's settings hold only what fdsml writes there (:func:`~fdsml.models.network.model_setting_keys`):
    they go to timm, which must never be told to read a file or build elsewhere. Settings without a backbone
    ``name`` build nothing (a training state of a model that is no :func:`build_model`'s)."""
    if not isinstance(settings, dict) or "name" not in settings:
        return
    name = settings["name"]
    try:
        allowed = model_setting_keys(str(name))
    except ValueError as error:
        raise CheckpointError(f"{path}: its model settings name no backbone fdsml builds ({error}); use a file written by fdsml") from None
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise CheckpointError(
            f"{path}: its model settings hold {unknown[0]!r}, which fdsml never writes there (a {name} model's are "
            f"{', '.join(sorted(allowed))}); use a file written by fdsml"
        )


def model_payload(model, **metadata: Any) -> dict[str, Any]:
    """What a pre-trained or fine-tuned model file holds: its configuration, its weights, metadata."""
    return {"model": dict(model.config), "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()}, "metadata": metadata}


def recorded_model_config(payload: dict[str, Any]) -> dict[str, Any]:
    """A model file's architecture, refused when it does not record the input normalisation its weights saw."""
    config = payload["model"]
    if "input_mean" not in config or "input_std" not in config:
        raise CheckpointError(
            f"this {config.get('name', '')} model file records no input normalisation (input_mean, input_std): it was "
            "written before fdsml recorded one, and its weights saw other inputs; run the pipeline that wrote it again"
        )
    return config


def model_from_payload(payload: dict[str, Any], device: str | torch.device = "cpu"):
    """The model a payload (:func:`model_payload`) describes, on ``device`` in eval mode."""
    model = build_model(**recorded_model_config(payload))
    model.load_state_dict(payload["state_dict"])
    return model.to(device).eval()


def load_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu"):
    """The model stored at ``path``, in eval mode and ready for inference, and its configuration.

    Returns ``(model, payload)`` where ``payload["model"]`` rebuilds the architecture
    (``build_model(**payload["model"])``) and ``payload["metadata"]`` says how it was trained.
    """
    payload = load_checkpoint_file(path, map_location=map_location)
    return model_from_payload(payload, map_location), payload
