"""Validating the descriptor (docs/method.md §6): does d_Psi order candidates as their renderings do?"""

from fdsml.descriptor_validation.agreement import (
    SAME_POSITION_GROUPS,
    measure_all_filters,
    measure_triplets,
    summarise_agreement,
    wilson_interval,
)
from fdsml.descriptor_validation.report import markdown_report
from fdsml.descriptor_validation.sweeps import (
    base_codes,
    is_monotone,
    run_sweeps,
    summarise_sweeps,
    sweep,
    sweep_factors,
    sweep_statistics,
)

__all__ = [
    "SAME_POSITION_GROUPS",
    "base_codes",
    "is_monotone",
    "markdown_report",
    "measure_all_filters",
    "measure_triplets",
    "run_sweeps",
    "summarise_agreement",
    "summarise_sweeps",
    "sweep",
    "sweep_factors",
    "sweep_statistics",
    "wilson_interval",
]
