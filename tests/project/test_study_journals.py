"""The study journals committed with the repository (a study file's ``storage``): each one a clone can reuse."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from fdsml.tuning.study_file import read_study
from tests.support import ROOT

JOURNALS = sorted(ROOT / study.storage for study in map(read_study, (ROOT / "conf/studies").glob("*.yml")) if study.storage is not None)


def held_units(journal: Path) -> list[str]:
    """The arms of the journal's RUNNING trials (none of them COMPLETE), which a clone on another machine cannot tell from live work."""
    storage = JournalStorage(JournalFileBackend(str(journal)))
    trials = [trial for summary in storage.get_all_studies() for trial in storage.get_all_trials(summary._study_id, deepcopy=False)]
    assert all("result" in trial.user_attrs for trial in trials if trial.state == TrialState.COMPLETE), f"{journal}: a COMPLETE unit without its result"
    return [trial.user_attrs.get("arm") for trial in trials if trial.state == TrialState.RUNNING]


def test_the_regime_study_keeps_its_units_in_a_committed_journal():
    assert ROOT / "results/studies/regime_boundary.jsonl" in JOURNALS
    assert (ROOT / "results/studies/regime_boundary.jsonl").is_file()


@pytest.mark.parametrize("journal", [journal for journal in JOURNALS if journal.exists()], ids=lambda journal: journal.stem)
def test_a_committed_journal_holds_no_unit_left_running(journal):
    assert held_units(journal) == [], f"{journal.relative_to(ROOT)}: units left RUNNING are held on every clone; stop the workers with Ctrl-C first"


def test_a_unit_left_running_is_found(tmp_path):
    journal = tmp_path / "study.jsonl"
    study = optuna.create_study(storage=JournalStorage(JournalFileBackend(str(journal))), study_name="s")
    study.enqueue_trial({})
    study.ask().set_user_attr("arm", "fdsl|seed=1")
    assert held_units(journal) == ["fdsl|seed=1"]
