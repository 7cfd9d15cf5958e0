"""The descriptor validation as a Markdown table: the same numbers as the JSON, for people."""

from __future__ import annotations

from fdsml.losses.candidates import FILTERS


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def _interval(bounds: list[float] | None) -> str:
    return "n/a" if bounds is None else f"[{100 * bounds[0]:.1f}, {100 * bounds[1]:.1f}]"


def _number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def markdown_report(summary: dict) -> str:
    """Agreement per filter, the ``same`` split by coefficient position, and sweep statistics."""
    lines = [
        "# Descriptor validation",
        "",
        "Agreement: fraction of triplets where the candidate closer in descriptor distance d_Psi is also",
        "closer in Chamfer distance D of the renderings (chance = 50 %), with 95 % Wilson intervals.",
        "",
        "| filter | triplets | agreement | 95 % CI | label rule agreement | same positive as label rule |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for name in FILTERS:
        if name not in summary["agreement"]:
            continue
        lines.append(
            f"| {name} | {summary['n_triplets_per_filter'][name]} | {_pct(summary['agreement'][name])} "
            f"| {_interval(summary['agreement_ci95'][name])} | {_pct(summary['label_rule_agreement'].get(name))} "
            f"| {_pct(summary['same_positive_rate'].get(name))} |"
        )
    if "same_by_position" in summary:
        lines += ["", "Filter `same`, split by the coefficient positions the three codes were perturbed at:", ""]
        lines += ["| group | triplets | agreement | 95 % CI |", "|---|---:|---:|---|"]
        for group, stats in summary["same_by_position"].items():
            lines.append(f"| {group.replace('_', ' ')} | {stats['n']} | {_pct(stats['fraction'])} | {_interval(stats['ci95'])} |")
    sweep_blocks = [(key, summary[key]) for key in ("sweeps", "sweeps_fresh_seeds") if key in summary]
    if sweep_blocks:
        lines += ["", "Perturbation sweeps (D to the base rendering as one coefficient is rescaled by s in [0.6, 1.4]):", ""]
        lines += ["| statistic | " + " | ".join(f"{block['seeding']} seed" for _, block in sweep_blocks) + " |"]
        lines += ["|---|" + "---:|" * len(sweep_blocks)]
        rows = [
            ("sweeps", "n_sweeps", str),
            ("contractive sweeps", "n_contractive", str),
            ("contractive fraction", "contractive_fraction", _pct),
            ("monotone (contractive)", "monotone_fraction_contractive", _pct),
            ("monotone within noise (contractive)", "monotone_within_noise_fraction_contractive", _pct),
            ("median Spearman (contractive)", "median_spearman_contractive", _number),
            ("monotone (non-contractive)", "monotone_fraction_noncontractive", _pct),
            ("monotone within noise (non-contractive)", "monotone_within_noise_fraction_noncontractive", _pct),
            ("median Spearman (non-contractive)", "median_spearman_noncontractive", _number),
            ("median Spearman pooled per base code", "median_spearman_pooled", _number),
            ("sweeps with an empty rendering", "n_empty", str),
            ("median noise floor (px)", "noise_floor_px_median", _number),
        ]
        for label, key, show in rows:
            lines.append(f"| {label} | " + " | ".join(show(block.get(key)) for _, block in sweep_blocks) + " |")
    return "\n".join(lines) + "\n"
