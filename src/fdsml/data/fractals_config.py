"""``params:fractals`` as typed settings: the formula family's spec, the held-out split of its table, the outputs.

They define the dataset every later step trains on or reads, so they live below the pipelines: the
fractals pipeline, pre-training, tuning, analysis, export, the run checks and the studies all
parse them here, alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fdsml.config import ConfigError, parse, require_positive
from fdsml.data.holdout import HoldoutSettings
from fdsml.families import FamilySpec, family_spec


@dataclass(frozen=True)
class OutputSettings:
    """What the fractals pipeline writes beside the table (`fractals.outputs`)."""

    materialize: bool = False
    shard_size: int = 1000
    grid_classes: int = 8
    grid_instances: int = 8

    def __post_init__(self):
        for key in ("shard_size", "grid_classes", "grid_instances"):
            require_positive(f"fractals.outputs.{key}", getattr(self, key))


@dataclass(frozen=True)
class FractalsConfig:
    """``params:fractals``: the selected family with its settings (the dataset's definition), the rows
    pre-training holds out of it (drawn from the family's seed; the table itself is unchanged), and the outputs."""

    spec: FamilySpec
    holdout: HoldoutSettings
    outputs: OutputSettings

    def plugin_modules(self) -> tuple[str, ...]:
        """The module of the selected family (:mod:`fdsml.plugins`)."""
        return (type(self.spec.family).__module__,)


def parse_fractals_params(params: dict[str, Any]) -> FractalsConfig:
    """Validate ``params:fractals``; a wrong key or value raises ``ConfigError`` naming it."""
    if not isinstance(params, dict):
        raise ConfigError(f"fractals: expected a mapping of parameters, got {type(params).__name__}")
    outputs = parse(OutputSettings, params.get("outputs", {}), "fractals.outputs")
    holdout = parse(HoldoutSettings, params.get("holdout", {}), "fractals.holdout")
    return FractalsConfig(family_spec(params, "fractals"), holdout, outputs)
