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


def _same_group(stats: dict) -> str:
    return f"{_pct(stats['fraction'])} {_interval(stats['ci95'])} (n={stats['n']})"


def _overrides(entry: dict) -> str:
    return ", ".join(f"`{key}={value}`" for key, value in entry["overrides"].items()) or "(default)"


def variants_markdown(entries: list[dict]) -> str:
    """The generator-variants table (:mod:`fdsml.validation.variants`): three tables, one row per variant.

    Triplet agreement per filter with 95 % intervals and the label rule of ``each``; the ``same``
    filter split by perturbed position; the sweeps per factor range. A variant whose generation
    failed (an entry with ``error``) is listed with its error only.
    """
    failed = [entry for entry in entries if "error" in entry]
    entries = [entry for entry in entries if "error" not in entry]
    filters = [name for name in FILTERS if any(name in entry["agreement"] for entry in entries)]
    labelled = sorted({name for entry in entries for name in entry["label_rule_agreement"]}, key=FILTERS.index)
    lines = [
        "# FineFractalDB generator variants",
        "",
        "Each variant is the default generator with the overrides listed; every figure is the descriptor",
        "validation's (`descriptor_validation.json`) on that variant's table.",
        "",
        "| variant | overrides | class filter accepts |",
        "|---|---|---:|",
    ]
    for entry in entries:
        lines.append(f"| {entry['name']} | {_overrides(entry)} | {_pct(entry['class_filter_acceptance_rate'])} |")
    for entry in failed:
        lines.append(f"| {entry['name']} | {_overrides(entry)} | generation failed: {entry['error']} |")
    lines += ["", "Agreement of d_Psi with the rendered shapes (D), 95 % Wilson intervals; label rule of the filters with one same-class candidate:", ""]
    header = [f"{name} agreement" for name in filters]
    header += [f"{name} label rule agreement | {name} same positive as label rule" for name in labelled]
    lines += ["| variant | triplets | " + " | ".join(header) + " |", "|---|---:|" + "---|" * (len(filters) + 2 * len(labelled))]
    for entry in entries:
        cells = [f"{_pct(entry['agreement'].get(name))} {_interval(entry['agreement_ci95'].get(name))}" for name in filters]
        for name in labelled:
            cells.append(f"{_pct(entry['label_rule_agreement'].get(name))} {_interval(entry['label_rule_agreement_ci95'].get(name))}")
            cells.append(_pct(entry["same_positive_rate"].get(name)))
        triplets = max(entry["n_triplets_per_filter"].values())
        lines.append(f"| {entry['name']} | {triplets} | " + " | ".join(cells) + " |")
    with_same = [entry for entry in entries if "same_by_position" in entry]
    if with_same:
        groups = list(with_same[0]["same_by_position"])
        lines += ["", "Filter `same`, agreement split by the coefficient positions the three codes were perturbed at:", ""]
        lines += ["| variant | " + " | ".join(group.replace("_", " ") for group in groups) + " |", "|---|" + "---|" * len(groups)]
        for entry in with_same:
            lines.append(f"| {entry['name']} | " + " | ".join(_same_group(entry["same_by_position"][g]) for g in groups) + " |")
    for label in dict.fromkeys(label for entry in entries for label in entry["sweeps"]):
        lines += ["", f"Perturbation sweeps of the class codes, s in {label} (common seed):", ""]
        lines += [
            "| variant | sweeps | contractive | monotone (contractive) | monotone within noise (contractive) "
            "| median Spearman (contractive) | sweeps with an empty rendering | empty renderings |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for entry in entries:
            block = entry["sweeps"].get(label)
            if block is None:
                continue
            lines.append(
                f"| {entry['name']} | {block['n_sweeps']} | {_pct(block['contractive_fraction'])} "
                f"| {_pct(block['monotone_fraction_contractive'])} | {_pct(block['monotone_within_noise_fraction_contractive'])} "
                f"| {_number(block['median_spearman_contractive'])} | {block['n_empty']} | {block['n_empty_renderings']} |"
            )
    return "\n".join(lines) + "\n"
