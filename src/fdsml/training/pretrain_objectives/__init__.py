"""Pre-training objectives, one module each, registered by name (``pretrain.objective`` selects one).

* ``pa_triplet``: PA-Triplet (docs/method.md §3), the method's objective;
* ``fdsl``: cross-entropy over the fractal classes (the FDSL baseline);
* ``fdsl_pa``: cross-entropy plus a weighted PA-Triplet term on the same embeddings;
* ``label_triplet``: control, a triplet loss whose class labels alone decide positive and negative;
* ``pml``: control, a pair-based pytorch-metric-learning loss on the class labels (Multi-Similarity).

A module holds its settings (``pretrain.<name>``, every one a plain key a study can search),
the objective the loop calls, and its :class:`~fdsml.training.pretrain_objectives.recipe.ObjectiveRecipe`
decorated with :func:`register_objective`. A new objective is one new file and its import below
(docs/architecture.md, "Where does a new X go"): imported by name, so that every objective's code
enters the fingerprint of a run (:func:`fdsml.fingerprints.code_digest` reads imports, not registrations).
"""

from __future__ import annotations

from fdsml.training.pretrain_objectives.recipe import (
    Batches,
    BatchNeed,
    ObjectiveRecipe,
    known_objectives,
    objective_recipe,
    register_objective,
    with_objective_sections,
)

from fdsml.training.pretrain_objectives import fdsl, fdsl_pa, label_triplet, pa_triplet, pml  # noqa: F401  (each registers its own)

__all__ = [
    "BatchNeed",
    "Batches",
    "ObjectiveRecipe",
    "known_objectives",
    "objective_recipe",
    "register_objective",
    "with_objective_sections",
]
