"""Nodes of the ``fractals`` pipeline: parse parameters, call ``fdsml.families``."""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
from PIL import Image

from fdsml.data.fractals_config import parse_fractals_params
from fdsml.families.generation import generate_table, is_up_to_date, render_shards, sample_grid, shards_fingerprint
from fdsml.fingerprints import content_digest, defining_configuration
from fdsml.run_events import StepReport, report_step
from fdsml import distributed

logger = logging.getLogger(__name__)


def generate_fractal_codes(
    params: dict[str, Any], stored_codes: pd.DataFrame | None, stored_summary: dict | None
) -> tuple[pd.DataFrame, dict]:
    """Generate the selected family's table from ``params:fractals``, or reuse the stored one when it is up to date.

    ``stored_codes`` / ``stored_summary`` are the previous run's outputs (None when absent); they
    are reused only when the summary's fingerprint matches the current family, configuration and code.
    Under torchrun rank 0 generates the table and the other replicas wait for it.
    Returns the instance table (``fractal_codes``) and the generation summary (``fractal_summary``).
    """
    spec = parse_fractals_params(params).spec
    up_to_date = is_up_to_date(stored_codes, stored_summary, spec)
    size = f"{spec.settings.n_classes} classes x {spec.settings.instances_per_class} instances"
    step = StepReport(f"{spec.family.title} table", "fractal_codes", reused=up_to_date, detail=size)
    if up_to_date:
        report_step(logger, step, "%s is up to date (fingerprint %s): reusing the stored table", spec.family.title, stored_summary["fingerprint"][:12])
        return stored_codes, stored_summary
    table, summary = distributed.on_main_rank(lambda: generate_table(spec), distributed.current())  # torchrun: once, on rank 0
    report_step(
        logger,
        step,
        "Accepted %.1f%% of instance draws; median occupancy %.3f",
        100 * summary["instance_acceptance_rate"],
        summary["occupancy"]["median"],
    )
    return table, summary


def render_sample_grid(fractal_codes: pd.DataFrame, params: dict[str, Any]) -> Image.Image:
    """A PNG grid of renderings, rows = classes, columns = instances (``fractal_samples``)."""
    config = parse_fractals_params(params)
    grid = sample_grid(fractal_codes, config.spec, config.outputs.grid_classes, config.outputs.grid_instances)
    return Image.fromarray(grid, mode="L")


def materialize_renderings(fractal_codes: pd.DataFrame, params: dict[str, Any]) -> dict[str, Any]:
    """Rendered images as ``.npy`` shards in table order (``fractal_images``); none unless ``materialize``.

    The shards' fingerprint names the table by its content, digested here from the table read (a
    summary's recorded digest would go stale when the table is edited and a run starts at this node)."""
    config = parse_fractals_params(params)
    outputs, spec = config.outputs, config.spec
    shards = render_shards(fractal_codes, spec, outputs.shard_size, spec.settings.workers) if outputs.materialize else ()
    return {
        "shards": shards,
        "materialized": outputs.materialize,
        "size": spec.size,
        "family": spec.name,
        "settings": defining_configuration(spec.settings),
        "fingerprint": shards_fingerprint(content_digest(fractal_codes), spec) if outputs.materialize else None,
    }
