"""The model card (``README.md``) of an exported backbone: what it was trained on, how, and how well.

Hugging Face reads the YAML front matter (licence, library, tags); the body says which
FineFractalDB, which objective and filter, the recipe, and the run's own numbers. Everything
comes from the model file's own record of how it was trained (its ``metadata``) and the run's
history, never from the configuration at export time, which may have changed since.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fdsml.reporting.history import describe_loss_trend
from fdsml.reporting.provenance import not_run_for_this_checkpoint

NOT_RECORDED = "not recorded: this model file predates fdsml recording it; pre-train again to have it"


def model_card(
    *,
    name: str,
    licence: str,
    architecture: str,
    payload: dict[str, Any],
    history: pd.DataFrame | None = None,
    downstream: str | None = None,
) -> str:
    """Markdown model card; ``downstream`` is the retrieval comparison table when one was computed from this model."""
    model, metadata = payload["model"], payload.get("metadata", {})
    data = dict(metadata.get("data") or {})
    family = data.pop("family", "formula-driven images")
    sections = [
        _front_matter(licence),
        f"# {name}\n\nA `{architecture}` trunk pre-trained on {family} (synthetic formula-driven images) "
        f"with fdsml. It returns pooled features ({_input(model)}).",
        _usage(name),
        f"## Pre-training data: {family}\n\n" + (_table(data) if data else NOT_RECORDED),
        _objective(metadata),
        _recipe(model, metadata),
        _metrics(history, downstream),
        f"## Licence\n\n`{licence}`. {family} is generated from formulas: no real image was used in pre-training.",
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


def _objective(metadata: dict[str, Any]) -> str:
    objective = metadata.get("objective", "unknown")
    rows = {"objective": objective}
    if objective == "pa_triplet":
        rows |= {"candidate filter": metadata.get("filter"), "triplets": metadata.get("mode")}
    return "## Objective\n\n" + _table(rows)


def _recipe(model: dict[str, Any], metadata: dict[str, Any]) -> str:
    rows = {"backbone": model["name"], "input size": model["img_size"]}
    recipe = metadata.get("recipe")
    if recipe is None:
        rows["optimizer"] = NOT_RECORDED
    else:
        optimizer = recipe["optimizer"]
        global_batch = recipe["batch_per_replica"] * recipe["world_size"]
        rows |= {
            "batch": f"{recipe['batch']} per replica, {recipe['world_size']} replica(s): {global_batch} images",
            "optimizer": f"{optimizer['name']}, base lr {optimizer['base_lr']} (per {optimizer['reference_batch']} images): "
            f"lr {recipe['learning_rate']:.4g}, weight decay {optimizer['weight_decay']}, {optimizer['schedule']}",
            "seed": recipe["seed"],
        }
    rows["steps"] = metadata.get("steps", "unknown")
    return "## Recipe\n\n" + _table(rows)


def _metrics(history: pd.DataFrame | None, downstream: str | None) -> str:
    lines = ["## Metrics"]
    if history is not None and len(history):
        lines.append(f"Pre-training {describe_loss_trend(history)}.")
    else:
        lines.append("No pre-training history was recorded.")
    found = downstream.strip() if downstream else not_run_for_this_checkpoint("retrieval results", "retrieval", "export it again").strip()
    lines.append("Retrieval after fine-tuning (fdsml's retrieval pipeline):\n\n" + found)
    return "\n\n".join(lines)


def _table(rows: dict[str, Any]) -> str:
    return "| | |\n|---|---|\n" + "\n".join(f"| {key} | {value} |" for key, value in rows.items())
