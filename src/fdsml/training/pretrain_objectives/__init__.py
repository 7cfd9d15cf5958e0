"""Pre-training objectives, one module each, registered by name (``pretrain.objective`` selects one).

* ``pa_triplet``: PA-Triplet (docs/method.md §3), the method's objective;
* ``fdsl``: cross-entropy over the fractal classes (the FDSL baseline);
* ``fdsl_pa``: cross-entropy plus a weighted PA-Triplet term on the same embeddings;
* ``label_triplet``: control, a triplet loss whose class labels alone decide positive and negative;
* ``pml``: control, a pair-based pytorch-metric-learning loss on the class labels (Multi-Similarity).

A module holds its settings (``pretrain.<name>``, every one a plain key a study can search; its
defaults where the configuration has no block), the objective the loop calls, and its
:class:`~fdsml.training.pretrain_objectives.recipe.ObjectiveRecipe` decorated with
:func:`register_objective`. A new objective is one new file in this folder, found by the registry
(:mod:`fdsml.plugins`), or one module of your own package named by an entry point of group
``fdsml.objectives`` (docs/plugins.md). Nothing imports an objective by name: its code enters the
fingerprint of the runs that select it, and of no other (:mod:`fdsml.fingerprints`).
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

__all__ = [
    "BatchNeed",
    "Batches",
    "ObjectiveRecipe",
    "known_objectives",
    "objective_recipe",
    "register_objective",
    "with_objective_sections",
]
