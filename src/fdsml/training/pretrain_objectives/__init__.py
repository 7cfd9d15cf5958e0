"""Pre-training objectives, one module each, registered by name (``pretrain.objective`` selects one).

* ``pa_triplet``: PA-Triplet (docs/method.md §3), the method's objective;
* ``fdsl``: cross-entropy over the fractal classes (the FDSL baseline);
* ``fdsl_pa``: cross-entropy plus a weighted PA-Triplet term on the same embeddings;
* ``label_triplet``: control, a triplet loss whose class labels alone decide positive and negative;
* ``pml``: control, a pair-based pytorch-metric-learning loss on the class labels (Multi-Similarity).

A module holds its settings (``pretrain.<name>``, every one a plain key a study can search),
the objective the loop calls, and its :class:`~fdsml.training.pretrain_objectives.recipe.ObjectiveRecipe`
decorated with :func:`register_objective`. Every module of this package is imported here, so a new
objective is one new file (docs/architecture.md, "Where does a new X go").
"""

from __future__ import annotations

import importlib
import pkgutil

from fdsml.training.pretrain_objectives.recipe import (
    Batches,
    BatchNeed,
    ObjectiveRecipe,
    known_objectives,
    objective_modules,
    objective_recipe,
    register_objective,
    with_objective_sections,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "BatchNeed",
    "Batches",
    "ObjectiveRecipe",
    "known_objectives",
    "objective_modules",
    "objective_recipe",
    "register_objective",
    "with_objective_sections",
]
