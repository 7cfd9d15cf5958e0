"""Tuning: Optuna studies over the ``pretrain`` and ``retrieval`` parameters, each trial a real run of the project.

:mod:`~fdsml.tuning.config` (``params:tune``), :mod:`~fdsml.tuning.space` (the search space and its
overlay), :mod:`~fdsml.tuning.objective` (one trial), :mod:`~fdsml.tuning.pruning` (the validation's
values as intermediate values), :mod:`~fdsml.tuning.storage` (SQLite, PostgreSQL or a journal file),
:mod:`~fdsml.tuning.study` (checks, budget, resume) and :mod:`~fdsml.tuning.outputs` (table, overlay,
pictures); :mod:`~fdsml.tuning.arms` runs a fixed set of arms on the same storages: the study files of
conf/studies (:mod:`~fdsml.tuning.study_file`, their steps :mod:`~fdsml.tuning.study_steps`, the runner
:mod:`~fdsml.tuning.study_runner`, the table :mod:`~fdsml.tuning.study_table`).
docs/tuning.md says how to run one.

The package imports none of them: a module's fingerprint closure takes in its package's imports, so a study unit
(keyed by :mod:`~fdsml.tuning.study_steps`' closure) would otherwise re-key at every edit of the study storage or the
tune pipeline's objective, neither of which its result depends on.
"""
