"""Which numbers belong to a checkpoint: a stage that shows another stage's numbers beside a model shows them only
when they were computed from that model.

Every result that pairs numbers with a model records, for each starting point, the checkpoint it began from and
the content digest of that trunk (:func:`fdsml.models.starting_points.start_record`: retrieval's and
classification's metrics, robustness's, analysis's). The model card (export) and the report compare those
records with the model they describe; a section whose numbers began from another model, or that records none,
says "not run for this checkpoint" and names the command that measures it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fdsml.models.starting_points import PRETRAINED, trunk_digest


def recorded_starts(artefact: Any) -> Iterator[Mapping[str, Any]]:
    """Every start record (a mapping holding ``trunk_digest``) at any depth of a results file's content."""
    if isinstance(artefact, Mapping):
        if "trunk_digest" in artefact:
            yield artefact
        for value in artefact.values():
            yield from recorded_starts(value)


def computed_from(artefact: Any, model: dict) -> bool:
    """Whether a result began from ``model``'s trunk (some start of it records its digest): the model card's rule."""
    digest = trunk_digest(model)
    return any(start["trunk_digest"] == digest for start in recorded_starts(artefact))


def describes(artefact: Any, pretrained_model: dict) -> bool:
    """Whether a result pairs its numbers with the pipeline's ``pretrained_model`` as it is now: it records where its
    starts began, and every start that began from the pre-trained model began from this one (the report's rule)."""
    digest = trunk_digest(pretrained_model)
    starts = list(recorded_starts(artefact))
    return bool(starts) and all(start["trunk_digest"] == digest for start in starts if start.get("checkpoint") == PRETRAINED)


def not_run_for_this_checkpoint(results: str, pipeline: str, then: str) -> str:
    """The line a section shows in place of numbers computed from another model (or from none it can name)."""
    return (
        f"Not run for this checkpoint: no {results} on disk began from it (they began from another model, record "
        f"none, or were never made). `kedro run --pipelines={pipeline}` measures it; then {then}.\n"
    )
