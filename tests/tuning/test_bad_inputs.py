"""Bad ``params:tune`` stops before any trial, with one message naming the key."""

import pytest

from fdsml.config import ConfigError
from fdsml.tuning.config import parse_tune_params
from fdsml.tuning.objective import TrialObjective
from fdsml.tuning.study import check_study, load_study
from tests.support import LR_SPACE, TUNING_BASE, tune_params

PK = ["pretrain.data.classes_per_batch", "pretrain.data.instances_per_class"]


def _check(tmp_path, pretrain=None, **changes):
    """Parse ``params:tune``, check the study against the configuration and open its storage, as a run does first."""
    config = parse_tune_params(tune_params(tmp_path, **changes))
    check_study(TrialObjective(config, {"pretrain": pretrain or TUNING_BASE["pretrain"], "retrieval": TUNING_BASE["retrieval"]}, inputs=None))
    load_study(config)


def test_the_shipped_study_passes_its_checks_and_opens_its_sqlite_file(tmp_path):
    _check(tmp_path, space=TUNING_BASE["tune"]["space"])
    assert (tmp_path / "storage/pretrain.db").is_file()


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"space": [LR_SPACE | {"key": "pretrain.optimizer.base_rate"}]}, "tune.space.pretrain.optimizer.base_rate: not a parameter of the configuration"),
        ({"space": [LR_SPACE | {"key": "fractals.n_classes"}]}, "tune.space.fractals.n_classes: a study searches pretrain or retrieval"),
        ({"space": [LR_SPACE | {"low": 0.5, "high": 0.5}]}, "tune.space.pretrain.optimizer.base_lr: range [0.5, 0.5] is empty or inverted"),
        ({"space": [LR_SPACE | {"low": 2.0, "high": 0.05}]}, "tune.space.pretrain.optimizer.base_lr: range [2.0, 0.05] is empty or inverted"),
        ({"space": [LR_SPACE | {"low": 0.0}]}, "tune.space.pretrain.optimizer.base_lr: a log range must lie above zero"),
        ({"space": [LR_SPACE | {"low": -1.0, "high": 1.0}]}, "tune.space.pretrain.optimizer.base_lr: a log range must lie above zero"),
        ({"space": [{"key": "pretrain.pa_triplet.margin", "low": -0.5, "high": 0.5}]}, "tune.space.pretrain.pa_triplet.margin: -0.5 is refused"),
        ({"space": [{"key": "pretrain.pa_triplet.reducer", "choices": ["mean", "median"]}]}, "tune.space.pretrain.pa_triplet.reducer: 'median' is refused"),
        ({"space": [{"key": "pretrain.validation.probe.dataset", "choices": ["omniglot"]}]}, "tune.space.pretrain.validation.probe.dataset: set by the study"),
        ({"space": [LR_SPACE, LR_SPACE]}, "tune.space.pretrain.optimizer.base_lr: listed more than once"),
        ({"space": []}, "tune.space: empty"),
        ({"sampler": {"name": "grid"}}, "tune.space.pretrain.optimizer.base_lr: the grid sampler visits listed values"),
        ({"metric": "pretrain.val_probe_recall_at_5"}, "tune.metric: no selected pipeline writes 'pretrain.val_probe_recall_at_5'"),
        ({"metric": "classification.top1"}, "tune.metric: no selected pipeline writes 'classification.top1'"),
        ({"validation_dataset": "omniglot"}, "tune.validation_dataset: 'omniglot' is a test split"),
        ({"heartbeat": {"interval_s": 5, "grace_s": 5}}, "tune.heartbeat.grace_s: 5 must exceed interval_s (5)"),
        ({"space": [{"key": "retrieval.optimizer.base_lr", "low": 1e-4, "high": 1e-2, "log": True}]}, "tune.space.retrieval.optimizer.base_lr: the metric pretrain.val_probe_recall_at_1 runs no fine-tuning"),
        ({"storage": "postgresql://tuner@127.0.0.1:9/studies"}, "tune.storage: cannot open 'postgresql://tuner@127.0.0.1:9/studies'"),
        ({"storage": "sqlite:////proc/no/such/study.db"}, "tune.storage: cannot open 'sqlite:////proc/no/such/study.db'"),
        ({"storage": "journal:/no/such/folder/study.log"}, "tune.storage: the journal file's folder /no/such/folder does not exist"),
        ({"space": [LR_SPACE | {"low": 0.05, "high": 0.2}]}, "tune.baseline: the configuration's pretrain.optimizer.base_lr (1.31) lies outside tune.space"),
        ({"storage": "studies.txt"}, "tune.storage: 'studies.txt' is neither a database URL"),
        ({"study": ".."}, "tune.study: '..' names files and folders and must stay inside their folder"),
        ({"arms": {"../../x": {"method": "fdsml"}}, "arm": "../../x"}, "tune.arms.../../x: '../../x' names files and folders"),
        ({"space": [{"keys": [PK[0]], "choices": [[4]]}]}, "tune.space[0].keys: a list of two or more dotted keys"),
        ({"space": [{"keys": PK, "choices": [[4, 10], [20]]}]}, f"tune.space.{'+'.join(PK)}: each choice lists one value per key (2), got [20]"),
        ({"space": [{"keys": PK, "choices": [[8, 5]], "log": True}]}, f"tune.space.{'+'.join(PK)}: a joint entry is {{keys: [...], choices: [[...], ...]}} and nothing else"),
        ({"space": [{"keys": [PK[0], "fractals.n_classes"], "choices": [[8, 5]]}]}, "a study searches pretrain or retrieval parameters"),
        ({"space": [{"keys": PK, "choices": [[8, 5]]}, {"key": PK[1], "choices": [5]}]}, f"tune.space.{PK[1]}: listed more than once"),
        ({"space": [{"keys": PK, "choices": [[8, 5], [40, 1]]}]}, f"tune.space.{'+'.join(PK)}: '[40, 1]' is refused by the configuration"),
        ({"space": [{"keys": PK, "choices": [[4, 10]]}]}, f"tune.baseline: the configuration's {'+'.join(PK)} ('[8, 5]') lies outside"),
    ],
)
def test_a_bad_study_is_refused_naming_the_key(tmp_path, changes, message):
    with pytest.raises(ConfigError) as error:
        _check(tmp_path, **changes)
    assert message in str(error.value)
    assert not (tmp_path / "storage").exists() or "storage" in changes or not list((tmp_path / "storage").iterdir())


@pytest.mark.parametrize(
    "validation, message",
    [
        ({"every": 0}, "tune.metric: pre-training writes no val_probe_recall_at_1 (pretrain.validation.every: 0"),
        (
            {"probe": None},
            f"tune.metric: pre-training writes no val_probe_recall_at_1 (pretrain.validation.every: {TUNING_BASE['pretrain']['validation']['every']}, probe: none)",
        ),
    ],
)
def test_a_metric_the_pre_training_does_not_write_is_refused(tmp_path, validation, message):
    pretrain = TUNING_BASE["pretrain"] | {"validation": TUNING_BASE["pretrain"]["validation"] | validation}
    with pytest.raises(ConfigError, match="tune.metric") as error:
        _check(tmp_path, pretrain=pretrain)
    assert message in str(error.value)


def test_a_key_of_the_optimizer_the_backbone_does_not_train_with_is_refused(tmp_path):
    vit = TUNING_BASE["pretrain"] | {"model": TUNING_BASE["pretrain"]["model"] | {"backbone": "vit_tiny_patch4"}}
    with pytest.raises(ConfigError, match=r"tune.space.pretrain.optimizer.base_lr: the runs train with pretrain.transformer_optimizer .*"
                       r"so pretrain.optimizer.base_lr changes nothing; search pretrain.transformer_optimizer.base_lr"):
        _check(tmp_path, pretrain=vit)
    _check(tmp_path, pretrain=vit, space=[LR_SPACE | {"key": "pretrain.transformer_optimizer.base_lr", "low": 1e-4, "high": 1e-3}])
    with pytest.raises(ConfigError, match=r"search pretrain.optimizer.base_lr"):  # ResNet-18 trains with pretrain.optimizer
        _check(tmp_path, space=[LR_SPACE | {"key": "pretrain.transformer_optimizer.base_lr", "low": 1e-4, "high": 1e-3}])


def test_a_study_keeps_its_metric(tmp_path):
    _check(tmp_path)
    with pytest.raises(ConfigError, match="tune.metric: study 'pretrain' .* maximises pretrain.val_probe_recall_at_1; name a new tune.study"):
        _check(tmp_path, metric="pretrain.val_unseen_agreement_same")


def test_the_probe_reads_the_validation_split_and_each_trial_its_own_folders(tmp_path):
    config = parse_tune_params(tune_params(tmp_path, metric="retrieval.map@r"))
    objective = TrialObjective(config, {"pretrain": TUNING_BASE["pretrain"], "retrieval": TUNING_BASE["retrieval"]}, inputs=None)
    trial = objective.trial_configuration(7, {"pretrain.optimizer.base_lr": 0.3})
    assert trial["pretrain"]["validation"]["probe"]["dataset"] == trial["retrieval"]["data"]["dataset"] == "omniglot_validation"
    assert trial["pretrain"]["optimizer"]["base_lr"] == 0.3 and TUNING_BASE["pretrain"]["optimizer"]["base_lr"] != 0.3
    assert trial["pretrain"]["run_dir"] == "data/06_models/tune/pretrain/trial_7/pretrain"
    assert trial["retrieval"]["run_dir"] == "data/06_models/tune/pretrain/trial_7/retrieval"
    assert [start["name"] for start in trial["retrieval"]["starts"]] == ["fdsml"]

