"""Nodes of the ``export`` pipeline: parse parameters, write the card, call ``fdsml.models.export``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fdsml.models.backbones import backbone_recipe
from fdsml.models.export import TimmExport, export_trunk, parse_export_params
from fdsml.reporting.model_card import model_card
from fdsml.reporting.provenance import computed_from


def export_backbone(
    pretrained_model: dict,
    pretrain_history: pd.DataFrame,
    retrieval_table: str | None,
    retrieval_metrics: dict | None,
    export_params: dict[str, Any],
) -> TimmExport:
    """The pre-trained trunk (``exported_backbone``) with a card from the model file's record of its data and
    recipe, and the run's metrics: the pretrain and fractals parameters of today are not read.

    ``retrieval_table`` is the retrieval comparison when that pipeline has run, else ``None``; it joins the card only
    when ``retrieval_metrics`` records that a start began from this very trunk (by its content digest).
    """
    config = parse_export_params(export_params)
    if not computed_from(retrieval_metrics, pretrained_model):
        retrieval_table = None  # another model's numbers, or none recorded: the card says it was not run for this one
    card = model_card(
        name=config.name,
        licence=config.licence,
        architecture=backbone_recipe(pretrained_model["model"]["name"]).timm_name,
        payload=pretrained_model,
        history=pretrain_history,
        downstream=retrieval_table,
    )
    return export_trunk(pretrained_model, config, card)
