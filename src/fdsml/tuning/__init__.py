"""Tuning: Optuna studies over the ``pretrain`` and ``retrieval`` parameters, each trial a real run of the project.

:mod:`~fdsml.tuning.config` (``params:tune``), :mod:`~fdsml.tuning.space` (the search space and its
overlay), :mod:`~fdsml.tuning.objective` (one trial), :mod:`~fdsml.tuning.pruning` (the validation's
values as intermediate values), :mod:`~fdsml.tuning.storage` (SQLite, PostgreSQL or a journal file),
:mod:`~fdsml.tuning.study` (checks, budget, resume) and :mod:`~fdsml.tuning.outputs` (table, overlay,
pictures); :mod:`~fdsml.tuning.arms` runs a fixed set of arms on the same storages: the study files of
conf/studies (:mod:`~fdsml.tuning.study_file`, their steps :mod:`~fdsml.tuning.study_steps`, the runner
:mod:`~fdsml.tuning.study_runner`, the table :mod:`~fdsml.tuning.study_table`).
docs/tuning.md says how to run one.
"""

from fdsml.tuning.config import TuneConfig, parse_tune_params
from fdsml.tuning.objective import TrialInputs, TrialObjective
from fdsml.tuning.study import load_study, run_study

__all__ = ["TrialInputs", "TrialObjective", "TuneConfig", "load_study", "parse_tune_params", "run_study"]
