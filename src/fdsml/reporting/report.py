"""Assemble the report: sections in data-flow order, each from a pipeline's own tables and pictures.

Pictures are linked by file name: the report lives in the same folder as every picture
(``data/08_reporting/``), so the folder can be copied or served as it is. A study file's page lies in
its subfolder ``studies/`` (catalog ``study_page``); its links are rebased onto the report's folder
when it is embedded (:func:`fdsml.reporting.embedding.embed_page`).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from fdsml.reporting.embedding import embed_page  # noqa: E402
from fdsml.reporting.history import SE_PREFIX, VALIDATION_PREFIX, describe_loss_trend, validation_cost, validation_metrics  # noqa: E402
from fdsml.reporting.provenance import not_run_for_this_checkpoint  # noqa: E402


def training_curves(history: pd.DataFrame, title: str):
    """Loss (smoothed) and learning rate against the step, and the held-out validation's metrics when it ran."""
    validation = validation_metrics(history)
    panels = 3 if len(validation) else 2
    figure, axes = plt.subplots(1, panels, figsize=(4.5 * panels, 3.2))
    loss_axis, lr_axis = axes[:2]
    window = max(len(history) // 20, 1)
    loss_axis.plot(history["step"], history["loss"], alpha=0.3, color="tab:blue", label="per step")
    loss_axis.plot(history["step"], history["loss"].rolling(window, min_periods=1).mean(), color="tab:blue", label=f"mean of {window}")
    loss_axis.set(xlabel="step", ylabel="loss", title=title)
    loss_axis.legend(fontsize=8)
    lr_axis.plot(history["step"], history["lr"], color="tab:orange")
    lr_axis.set(xlabel="step", ylabel="learning rate", title="schedule")
    if len(validation):
        for name, values in validation.items():
            axes[2].plot(validation.index, values, marker="o", label=name.removeprefix(VALIDATION_PREFIX))
        axes[2].set(xlabel="step", ylabel="held-out metric", title="held-out validation", ylim=(0, 1.02))
        axes[2].legend(fontsize=7)
    figure.tight_layout()
    return figure


STUDY_PAGES = "studies"  # the study files' pages, relative to the report's folder (conf/base/catalog_study.yml)


def _picture(title: str, file_name: str) -> str:
    return f"![{title}]({file_name})\n"


def fractals_section(summary: dict) -> str:
    """The formula dataset: its definition (the family's own rows), acceptance, occupancy and time."""
    occupancy = summary["occupancy"]
    rows = [
        ("classes x instances", f"{summary['n_classes']} x {summary['instances_per_class']} = {summary['n_instances']}"),
        *((name, value) for name, value in summary["definition"].items() if name != "classes x instances"),
        ("instance draws accepted", f"{100 * summary['instance_acceptance_rate']:.1f} % of {summary['instance_draws']}"),
        ("rejected: invalid / occupancy", f"{summary['instance_invalid_rejections']} / {summary['instance_occupancy_rejections']}"),
        ("occupancy min / median / max", f"{occupancy['min']:.3f} / {occupancy['median']:.3f} / {occupancy['max']:.3f}"),
        ("generation time", f"{summary['seconds']:.1f} s"),
    ]
    table = "| | |\n|---|---|\n" + "\n".join(f"| {name} | {value} |" for name, value in rows)
    return f"## {summary['title']}\n\n" + table + "\n\n" + _picture("sample images", "fractal_samples.png")


def pretrain_section(history: pd.DataFrame) -> str:
    text = (
        f"{len(history)} steps; {describe_loss_trend(history)}; "
        f"{history['images_per_s'].median():.0f} images/s (median).\n"
    )
    return "## Pre-training\n\n" + text + heldout_validation(history) + "\n" + _picture("pre-training curves", "pretrain_curves.png")


def heldout_validation(history: pd.DataFrame) -> str:
    """The held-out validation at its first and last step, and its cost; a line saying it was off otherwise."""
    validation = validation_metrics(history)
    if not len(validation):
        return "\nNo held-out validation ran (`pretrain.validation.every` is off).\n"
    shown = validation.iloc[[0, -1]] if len(validation) > 1 else validation
    header = "| metric | " + " | ".join(f"step {step}" for step in shown.index) + " |\n"
    header += "|---|" + "---:|" * len(shown) + "\n"
    ran = history[history["validation_s"].notna()].set_index("step")
    errors = {name: ran[SE_PREFIX + name] if SE_PREFIX + name in ran else pd.Series(dtype=float) for name in shown.columns}

    def value(name: str, step: int) -> str:
        found, error = shown.at[step, name], errors[name].get(step)
        if pd.isna(found):
            return "n/a"
        return f"{found:.3f}" if error is None or pd.isna(error) else f"{found:.3f} ± {error:.3f}"

    rows = "".join(
        f"| {name.removeprefix(VALIDATION_PREFIX)} | " + " | ".join(value(name, step) for step in shown.index) + " |\n"
        for name in shown.columns
    )
    cost = validation_cost(history)
    return (
        "\nHeld-out validation (rows never trained on: `fractals.holdout`; agreement = fraction of held-out "
        "triplets per filter ordered as the descriptor orders them; top1 on held-out instances of training classes; "
        "class_recall_at_1 among held-out classes; probe_recall_at_1 of the frozen trunk on real images; each ± its "
        f"binomial standard error), {len(validation)} validations costing {100 * cost:.1f} % of the training steps' "
        "time:\n\n" + header + rows
    )


def validation_section(table: str) -> str:
    pictures = "".join(
        _picture(title, name)
        for title, name in (
            ("D versus s for one base code", "descriptor_sweep.png"),
            ("D versus descriptor distance", "descriptor_scatter.png"),
            ("sampled triplets per filter", "descriptor_triplet_grid.png"),
        )
    )
    return "## Descriptor validation\n\n" + embed_page(table) + "\n" + pictures


def _study_section(heading: str, table: str | None, how_to_make_it: str, folder: str = ".") -> str:
    """A study run on its own (too long for ``kedro run``): its page (lying in ``folder``, relative to the
    report's) when present, how to make it otherwise."""
    heading = f"## {heading}\n\n"
    return heading + (how_to_make_it if table is None else embed_page(table, folder))


def _study_file_section(heading: str, table: str | None, name: str, cost: str) -> str:
    """A study file's page (``kedro run --pipelines=study``) when present, the command that writes it otherwise."""
    return _study_section(
        heading,
        table,
        f"Not measured yet: `kedro run --pipelines=study --params=study.name={name}` writes "
        f"`data/08_reporting/{STUDY_PAGES}/{name}.{{md,json}}` ({cost}; `--params=study.name={name},study.scale=tiny` for a "
        "check that it runs), then run the report again.\n",
        STUDY_PAGES,
    )


def generator_variants_section(table: str | None) -> str:
    """The generator variants side by side (``conf/studies/generator_variants.yml``, about half an hour on 2 CPU cores)."""
    return _study_file_section("FineFractalDB generator variants", table, "generator_variants", "about half an hour on 2 CPU cores with `study.jobs=2`")


def pretraining_budget_section(table: str | None) -> str:
    """Recall@1 on Omniglot against the pre-training budget per method (``conf/studies/pretraining_budget.yml``; its time in docs/studies.md)."""
    return _study_file_section("Pre-training budget study", table, "pretraining_budget", "about 2 h 20 min on 2 CPU cores with `study.jobs=2`")


def pa_triplet_study_section(table: str | None) -> str:
    """What PA-Triplet learns per variant, `same`, `each` and FDSL (``conf/studies/pa_triplet_study.yml``, about 2 h)."""
    return _study_file_section("PA-Triplet: what the loss learns", table, "pa_triplet_study", "about 2 h on 2 loaded CPU cores for every arm and 3 seeds")


def tuning_section(table: str | None) -> str:
    """The last tuning study (``kedro run --pipelines=tune``, docs/tuning.md): its trials, best parameters and Optuna's pictures."""
    section = _study_section(
        "Tuning study",
        table,
        "Not run yet: `kedro run --pipelines=tune` runs the study of conf/base/parameters_tune.yml and writes "
        "`data/08_reporting/tune_study.md`, the best parameters and the study's pictures (docs/tuning.md), then run "
        "the report again.\n",
    )
    if table is None:
        return section
    return section + "\n" + "".join(
        _picture(title, name)
        for title, name in (
            ("optimisation history", "tune_history.png"),
            ("parameter importances", "tune_importances.png"),
            ("each parameter against the metric", "tune_slices.png"),
        )
    )


def _not_run(results: str, pipeline: str) -> str:
    return not_run_for_this_checkpoint(results, pipeline, "run the report again")


def retrieval_section(table: str | None) -> str:
    """The retrieval comparison and its top-5 picture; None: the results on disk are another model's (:mod:`~fdsml.reporting.provenance`)."""
    if table is None:
        return "## Retrieval\n\n" + _not_run("retrieval results", "retrieval")
    return "## Retrieval\n\n" + embed_page(table) + "\n" + _picture("top-5 retrievals", "retrieval_examples.png")


def classification_section(classification_table: str | None, robustness_table: str | None) -> str:
    """Top-1 / top-5 after fine-tuning, then classification error (%) per corruption group; a table that is None
    (another model's results) says it was not run for this checkpoint."""
    classification = embed_page(classification_table) if classification_table is not None else _not_run("classification results", "classification")
    robustness = (
        embed_page(robustness_table) + "\n" + _picture("one image under every corruption and severity", "corruption_examples.png")
        if robustness_table is not None
        else _not_run("robustness results", "classification,robustness")
    )
    return (
        "## Classification and robustness\n\nTop-1 / top-5 accuracy (%) after fine-tuning:\n\n"
        + classification
        + "\nClassification error (%) on the clean test set and averaged over each corruption group:\n\n"
        + robustness
    )


def analysis_section(metrics: dict | None) -> str:
    """Pictures of the embeddings, with the numbers that do not rest on a 2-D projection; None: drawn from another model."""
    if metrics is None:
        return "## What the embeddings look like\n\n" + _not_run("analysis pictures", "analysis")
    smoothness = metrics["trajectory"]["largest_over_median_step"]
    similarity = metrics.get("gradcam", {}).get("mean_cosine", {})
    lines = [f"| {name} | {value:.2f} |" for name, value in smoothness.items()]
    text = (
        "Trajectory smoothness (largest step between consecutive alphas over the median step, in the "
        "embedding space; 1 = perfectly even):\n\n| checkpoint | largest / median step |\n|---|---:|\n" + "\n".join(lines) + "\n"
    )
    if similarity:
        text += "\nGrad-CAM similarity to the reference model (mean cosine):\n\n| models | mean cosine |\n|---|---:|\n"
        text += "\n".join(f"| {name} | {'n/a (every map empty)' if value is None else f'{value:.3f}'} |" for name, value in similarity.items()) + "\n"
    pictures = "".join(
        _picture(title, name)
        for title, name in (
            ("UMAP of fractal classes", "analysis_embedding_map.png"),
            ("interpolation trajectory", "analysis_trajectory.png"),
            ("Grad-CAM", "analysis_gradcam.png"),
            ("Grad-CAM similarity", "analysis_gradcam_similarity.png"),
            ("CLS-to-patch attention", "analysis_attention.png"),
            ("sample fractals", "analysis_sample_grid.png"),
            ("sampled triplets per filter", "analysis_triplet_grid.png"),
        )
    )
    return "## What the embeddings look like\n\n" + text + "\n" + pictures


def assemble(sections: list[str]) -> str:
    """The whole report (no timestamp: the same results give the same bytes)."""
    head = (
        "# fdsml report\n\n"
        "Formula-driven supervised metric learning: FineFractalDB, PA-Triplet pre-training, descriptor "
        "validation and downstream evaluation, as measured by the last run of each pipeline; a downstream "
        "section shows only numbers computed from the pre-trained model above.\n\n"
    )
    return head + "\n".join(sections)
