"""Live metrics: a training stage's history rows in dvclive's files as the run goes (rank 0 only).

The loop produces each step's row once (:func:`fdsml.training.loop.settle_rows`); the catalog's
history table, the DVC plots and this live view are all made of those rows, whatever columns a
row has. A stage opens one :class:`LiveMetrics` in its ``live_dir`` and gives each of its
training runs a :class:`LiveRun` (its rows under a prefix naming the run, e.g. ``cub_seed0/``).
``dvc.yaml`` declares the files dvclive writes (``metrics.json``, ``plots/metrics``,
``params.yaml``) as the stage's outputs, so dvclive's own ``dvc.yaml`` editing stays off:
``dvc exp show`` and ``dvc plots show`` read them while ``dvc exp run`` runs.

The files are rebuilt, never appended to across runs: opening a stage's live metrics empties the
folder, and every run first writes the rows its checkpoint holds, then its new ones as they
settle. Rows a killed run wrote after its last checkpoint, which the resumed run trains again,
are therefore neither duplicated nor missing.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dvclive import Live

from fdsml.atomic import atomic_path
from fdsml import distributed

LIVE_FILES = ("metrics.json", "params.yaml", "plots/metrics")
"""What dvclive writes in a ``live_dir``, each declared in ``dvc.yaml`` as the stage's metrics, output and plots."""

class _AtomicSummaryLive(Live):
    """dvclive's logger with its summary (``metrics.json``) replaced atomically: a reader never sees half of it."""

    def make_summary(self) -> None:
        if self._step is not None:
            self.summary["step"] = self.step
        with atomic_path(self.metrics_file) as temporary:
            temporary.write_text(json.dumps(self.summary, indent=4) + "\n", encoding="utf-8")


class LiveRun:
    """One training run's rows, written under ``prefix`` of its stage's live metrics; call it with settled rows."""

    def __init__(self, live: Live, prefix: str):
        self._live, self._prefix = live, prefix

    def __call__(self, rows: Iterable[Mapping[str, Any]]) -> None:
        logged = False
        for row in rows:
            self._live.step = int(row["step"])
            for key, value in row.items():
                if key != "step" and isinstance(value, numbers.Real) and not isinstance(value, bool):
                    self._live.log_metric(self._prefix + key, value)
            logged = True
        if logged:
            self._live.make_summary()


class LiveMetrics:
    """A stage's live metrics in ``directory``: the parameters it runs with, its runs' rows, their final metrics."""

    def __init__(self, directory: str | Path, params: Mapping[str, Any]):
        self.directory = Path(directory)
        self._live = _AtomicSummaryLive(str(self.directory), dvcyaml=False, save_dvc_exp=False)
        self._live.log_params(json.loads(json.dumps(params, default=str)))

    def run(self, prefix: str = "") -> LiveRun:
        """The logger of one training run; ``prefix`` (ending in ``/``) names it inside a stage of several runs."""
        return LiveRun(self._live, prefix)

    def final(self, metrics: Mapping[str, float], prefix: str = "") -> None:
        """A finished run's final metrics (e.g. Recall@1 on the test split), into the summary only."""
        for name, value in metrics.items():
            self._live.log_metric(prefix + name, value, plot=False)
        self._live.make_summary()


def live_metrics(live_dir: str | Path | None, config, context: distributed.DistContext) -> LiveMetrics | None:
    """A stage's live metrics in ``live_dir``, with its parsed configuration ``config`` (a dataclass) as
    parameters; None off the main rank or without a ``live_dir``."""
    if live_dir is None or not context.is_main:
        return None
    return LiveMetrics(live_dir, asdict(config))
