"""Generator variants side by side: one entry of figures per FineFractalDB variant.

The method leaves parts of its generator open (``fractals.perturbation``, the class sampler, the
class filter); its published descriptor statistics are the only fingerprint of the choices it
made. A variant is the default parameters with a few dotted keys overridden
(:func:`fdsml.config.with_overlay`, existing keys only); its entry holds
those overrides and the descriptor validation's figures, named as in ``descriptor_validation.json``.
"""

from __future__ import annotations

from typing import Any

AGREEMENT_KEYS = (
    "agreement",
    "agreement_ci95",
    "n_triplets_per_filter",
    "shape_ties",
    "label_rule_agreement",
    "label_rule_agreement_ci95",
    "same_positive_rate",
    "same_by_position",
)
"""The triplet figures of ``descriptor_validation.json`` a variant entry keeps."""

SWEEP_KEYS = (
    "n_sweeps",
    "n_contractive",
    "contractive_fraction",
    "monotone_fraction_contractive",
    "monotone_within_noise_fraction_contractive",
    "median_spearman_contractive",
    "monotone_fraction_noncontractive",
    "monotone_within_noise_fraction_noncontractive",
    "median_spearman_noncontractive",
    "median_spearman_pooled",
    "n_empty",
    "n_empty_renderings",
    "noise_floor_px_median",
)
"""The sweep figures of ``descriptor_validation.json``'s ``sweeps`` a variant entry keeps."""


def variant_entry(
    name: str, overrides: dict[str, Any], validation: dict, sweeps_by_range: dict[str, dict], fractal_summary: dict
) -> dict:
    """One variant's row of the table: its overrides and every figure.

    ``validation`` is the summary of the ``validate_descriptor`` pipeline on the variant's table;
    ``sweeps_by_range`` maps a label of each sweep factor range to its ``summarise_sweeps``;
    ``fractal_summary`` is the variant's generation summary.
    """
    entry = {"name": name, "overrides": dict(overrides)}
    entry.update({key: validation[key] for key in AGREEMENT_KEYS if key in validation})
    entry["sweeps"] = {label: {key: block[key] for key in SWEEP_KEYS} for label, block in sweeps_by_range.items()}
    entry["class_filter_acceptance_rate"] = fractal_summary["class_filter_acceptance_rate"]
    entry["class_acceptance_rate"] = fractal_summary["class_acceptance_rate"]
    entry["instance_acceptance_rate"] = fractal_summary["instance_acceptance_rate"]
    return entry
