"""Two workers started independently on one study (Optuna's journal file, as on a shared file system)."""

import optuna
import pytest
from optuna.storages.journal import JournalFileBackend, JournalStorage

from tests.tuning.workers import two_workers_share_one_study


@pytest.mark.slow  # two Kedro runs side by side and a third: about 70 s on 2 idle cores
def test_two_workers_share_one_study_without_losing_or_repeating_a_trial(tmp_path):
    journal = tmp_path / "shared/tiny.log"
    journal.parent.mkdir()

    def read():  # the study as a fresh reader sees it
        return optuna.load_study(study_name="tiny", storage=JournalStorage(JournalFileBackend(str(journal))))

    two_workers_share_one_study(tmp_path, f"journal:{journal}", read, n_trials=4)
