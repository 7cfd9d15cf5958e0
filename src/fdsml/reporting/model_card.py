"""The model card (``README.md``) of an exported backbone: what it was trained on, how, and how well.

Hugging Face reads the YAML front matter (licence, library, tags); the body says which
FineFractalDB, which objective and filter, the recipe, and the run's own numbers.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fdsml.families import FamilySpec
from fdsml.reporting.history import describe_loss_trend
from fdsml.training.pretrain import PretrainConfig


def model_card(
    *,
    name: str,
    licence: str,
    architecture: str,
    payload: dict[str, Any],
    fractals: FamilySpec,
    pretrain: PretrainConfig,
    history: pd.DataFrame | None = None,
    downstream: str | None = None,
) -> str:
    """Markdown model card; ``downstream`` is the retrieval comparison table when the run has one."""
    model, metadata = payload["model"], payload.get("metadata", {})
    sections = [
        _front_matter(licence),
        f"# {name}\n\nA `{architecture}` trunk pre-trained on {fractals.family.title} (synthetic formula-driven images) "
        f"with fdsml. It returns pooled features ({_input(model)}).",
        _usage(name),
        _data(fractals),
        _objective(metadata),
        _recipe(model, pretrain, metadata),
        _metrics(history, downstream),
        f"## Licence\n\n`{licence}`. {fractals.family.title} is generated from formulas: no real image was used in pre-training.",
    ]
    return "\n\n".join(sections) + "\n"


def _front_matter(licence: str) -> str:
    return f"---\nlicense: {licence}\nlibrary_name: timm\ntags:\n- image-feature-extraction\n- timm\n- fdsml\n- formula-driven-supervised-learning\n---"


def _input(model: dict[str, Any]) -> str:
    return f"input {model.get('in_chans', 3)} x {model['img_size']} x {model['img_size']}"


def _usage(name: str) -> str:
    return (
        "## Use\n\n```python\nimport timm\n"
        f'model = timm.create_model("local-dir:path/to/{name}", pretrained=True, num_classes=0)  # or "hf-hub:<user>/{name}"\n'
        "transform = timm.data.create_transform(**timm.data.resolve_data_config(model=model))\n```\n\n"
        "Pass `num_classes=N` instead to get a new, untrained classifier on top."
    )


def _data(fractals: FamilySpec) -> str:
    return f"## Pre-training data: {fractals.family.title}\n\n" + _table(fractals.family.describe(fractals.settings))


def _objective(metadata: dict[str, Any]) -> str:
    objective = metadata.get("objective", "unknown")
    rows = {"objective": objective}
    if objective == "pa_triplet":
        rows |= {"candidate filter": metadata.get("filter"), "triplets": metadata.get("mode")}
    return "## Objective\n\n" + _table(rows)


def _recipe(model: dict[str, Any], pretrain: PretrainConfig, metadata: dict[str, Any]) -> str:
    optimizer, data = pretrain.optimizer, pretrain.data
    rows = {
        "backbone": model["name"],
        "input size": model["img_size"],
        "batch": f"{data.classes_per_batch} classes x {data.instances_per_class} instances",
        "optimizer": f"{optimizer.name}, base lr {optimizer.base_lr} (per {optimizer.reference_batch} images), "
        f"weight decay {optimizer.weight_decay}, {optimizer.schedule}",
        "steps": metadata.get("steps", "unknown"),
        "seed": pretrain.train.seed,
    }
    return "## Recipe\n\n" + _table(rows)


def _metrics(history: pd.DataFrame | None, downstream: str | None) -> str:
    lines = ["## Metrics"]
    if history is not None and len(history):
        lines.append(f"Pre-training {describe_loss_trend(history)}.")
    else:
        lines.append("No pre-training history was recorded.")
    if downstream:
        lines.append("Retrieval after fine-tuning (fdsml's retrieval pipeline):\n\n" + downstream.strip())
    else:
        lines.append("No downstream evaluation was run with this model yet (`kedro run --pipelines=retrieval`).")
    return "\n\n".join(lines)


def _table(rows: dict[str, Any]) -> str:
    return "| | |\n|---|---|\n" + "\n".join(f"| {key} | {value} |" for key, value in rows.items())
