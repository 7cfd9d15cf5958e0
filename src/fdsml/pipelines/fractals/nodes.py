"""Nodes of the ``fractals`` pipeline: parse parameters, call ``fdsml.ifs.finefractaldb``."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd
from PIL import Image

from fdsml.config import parse, require_positive
from fdsml.data.holdout import HoldoutSettings
from fdsml.reuse import non_defining
from fdsml.ifs.finefractaldb import (
    FineFractalDBConfig,
    generate_finefractaldb,
    is_up_to_date,
    render_shards,
    sample_grid,
    shards_fingerprint,
)
from fdsml.run_events import StepReport, report_step

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutputSettings:
    """What the pipeline writes beside the table."""

    materialize: bool = False
    shard_size: int = 1000
    grid_classes: int = 8
    grid_instances: int = 8

    def __post_init__(self):
        for key in ("shard_size", "grid_classes", "grid_instances"):
            require_positive(f"fractals.outputs.{key}", getattr(self, key))


@dataclass(frozen=True)
class FractalsConfig(FineFractalDBConfig):
    """``params:fractals``: the dataset's definition (with the rows pre-training holds out) plus its outputs."""

    holdout: HoldoutSettings = field(default_factory=HoldoutSettings)  # drawn from ``seed``; the table itself is unchanged
    outputs: OutputSettings = non_defining(default_factory=OutputSettings)  # written beside the table, not in it


def parse_fractals_params(params: dict[str, Any]) -> FractalsConfig:
    """Validate ``params:fractals``; a wrong key or value raises ``ConfigError`` naming it."""
    return parse(FractalsConfig, params, "fractals")


def generate_fractal_codes(
    params: dict[str, Any], stored_codes: pd.DataFrame | None, stored_summary: dict | None
) -> tuple[pd.DataFrame, dict]:
    """Sample FineFractalDB from ``params:fractals``, or reuse the stored table when it is up to date.

    ``stored_codes`` / ``stored_summary`` are the previous run's outputs (None when absent); they
    are reused only when the summary's fingerprint matches the current configuration and code.
    Returns the instance table (``fractal_codes``) and the generation summary (``fractal_summary``).
    """
    config = parse_fractals_params(params)
    up_to_date = is_up_to_date(stored_codes, stored_summary, config)
    size = f"{config.n_classes} classes x {config.instances_per_class} instances"
    step = StepReport("FineFractalDB table", "fractal_codes", reused=up_to_date, detail=size)
    if up_to_date:
        report_step(logger, step, "FineFractalDB is up to date (fingerprint %s): reusing the stored table", stored_summary["fingerprint"][:12])
        return stored_codes, stored_summary
    table, summary = generate_finefractaldb(config)
    report_step(
        logger,
        step,
        "Accepted %.1f%% of class codes and %.1f%% of instance draws; median occupancy %.3f",
        100 * summary["class_acceptance_rate"],
        100 * summary["instance_acceptance_rate"],
        summary["occupancy"]["median"],
    )
    return table, summary


def render_sample_grid(fractal_codes: pd.DataFrame, params: dict[str, Any]) -> Image.Image:
    """A PNG grid of renderings, rows = classes, columns = instances (``fractal_samples``)."""
    config = parse_fractals_params(params)
    grid = sample_grid(fractal_codes, config.render, config.outputs.grid_classes, config.outputs.grid_instances)
    return Image.fromarray(grid, mode="L")


def materialize_renderings(fractal_codes: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Rendered images as ``.npy`` shards in table order (``fractal_images``); none unless ``materialize``."""
    config = parse_fractals_params(params)
    outputs = config.outputs
    shards = render_shards(fractal_codes, config.render, outputs.shard_size, config.workers) if outputs.materialize else ()
    return {
        "shards": shards,
        "materialized": outputs.materialize,
        "size": config.render.size,
        "render": asdict(config.render),
        "fingerprint": shards_fingerprint(fractal_codes, config.render) if outputs.materialize else None,
    }
