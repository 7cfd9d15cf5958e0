"""The pre-trained trunk as a folder any timm project loads: ``timm.create_model("local-dir:<folder>", pretrained=True)``.

The folder holds ``config.json`` (timm's architecture name, ``num_classes`` 0, the arguments that
rebuild the trunk and a ``pretrained_cfg`` with the input size and preprocessing),
``model.safetensors`` (the trunk's native timm state dict) and the model card ``README.md``.
Only the trunk leaves: the embedding or classifier head is ours, and nothing a training
objective (CouCE, proxies) held is part of a model file, so what timm rebuilds is the plain
architecture. Upload the folder as it is to a Hugging Face model repository and
``hf-hub:<user>/<repo>`` loads the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import timm
from torch import nn

from fdsml.config import parse, require_fraction
from fdsml.errors import MissingInputError
from fdsml.models.checkpoint import model_from_payload
from fdsml.models.network import ModelSpec

CARD = "README.md"


@dataclass(frozen=True)
class Preprocessing:
    """How images reach the trunk besides its normalisation: what timm's ``resolve_data_config`` tells a user.

    The mean and std are not chosen here: they are the normalisation the model file records
    (:mod:`fdsml.models.normalisation`), the one every consumer of the model applies.
    """

    crop_pct: float = 1.0
    interpolation: Literal["bilinear", "bicubic", "nearest"] = "bilinear"

    def __post_init__(self):
        require_fraction("crop_pct", self.crop_pct, inclusive_zero=False)

    def data_config(self, spec: ModelSpec) -> dict[str, Any]:
        """timm's ``data_config`` for a trunk described by ``spec``: its input size and recorded normalisation."""
        return {
            "mean": tuple(spec.input_mean),
            "std": tuple(spec.input_std),
            "input_size": (spec.in_chans, spec.img_size, spec.img_size),
            "crop_pct": self.crop_pct,
            "crop_mode": "center",
            "interpolation": self.interpolation,
        }


@dataclass(frozen=True)
class ExportConfig:
    """``params:export``: the exported model's name (card title, suggested Hub repository), licence, preprocessing."""

    name: str = "fdsml-finefractaldb"
    licence: str = "apache-2.0"
    preprocessing: Preprocessing = field(default_factory=Preprocessing)


def parse_export_params(params: dict[str, Any]) -> ExportConfig:
    """Validate ``params:export``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(ExportConfig, params, "export")


@dataclass
class TimmExport:
    """A trunk ready to be written as a timm folder (:meth:`save`), with its preprocessing and card."""

    trunk: nn.Module
    spec: ModelSpec
    config: ExportConfig
    card: str

    @property
    def architecture(self) -> str:
        """timm's name of the trunk's architecture (its size arguments travel in ``model_args``)."""
        return self.trunk.pretrained_cfg["architecture"]

    def save(self, folder: str | os.PathLike) -> None:
        """Write ``config.json``, ``model.safetensors`` and ``README.md`` into ``folder``."""
        folder = Path(folder)
        source = {"tag": self.config.name, "license": self.config.licence}
        timm.models.save_for_hf(
            self.trunk,
            folder,
            model_config={"pretrained_cfg": source},
            safe_serialization=True,
            data_config=self.config.preprocessing.data_config(self.spec),
        )
        (folder / CARD).write_text(self.card, encoding="utf-8")


def export_trunk(payload: dict[str, Any], config: ExportConfig, card: str) -> TimmExport:
    """The trunk of the model a payload (:func:`fdsml.models.model_payload`) describes, as a :class:`TimmExport`."""
    model = model_from_payload(payload)
    return TimmExport(model.backbone, model.spec, config, card)


def load_exported(folder: str | os.PathLike, **kwargs: Any) -> nn.Module:
    """The model timm builds from an exported folder (``num_classes=0``: pooled features), in eval mode."""
    folder = Path(folder).resolve()
    if not (folder / "config.json").is_file():
        raise MissingInputError(f"no exported model at {folder} (config.json missing): run `kedro run --pipelines=export` first")
    return timm.create_model(f"local-dir:{folder}", pretrained=True, **kwargs).eval()
