"""The study runner: units keyed by their fingerprint (reused, rerun when changed or failed), the seed grid, shared pre-training, scratch's spread."""

import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from fdsml.config import env_parameters
from fdsml.tuning import study_runner
from fdsml.tuning.study_runner import parse_study_settings, plan_units, run_study, study_report
from fdsml.tuning.study_file import read_study, units
from fdsml.models.starting_points import trunk_state_dict
from fdsml.tuning.study_steps import STEPS, Step, _only_trainer, _start, _trunk
from tests.support import ROOT
from tests.tuning.study_files import CALLS, COUNTED, TINY_STUDY, counted, study_project

@pytest.fixture
def counting(monkeypatch, tmp_path):
    monkeypatch.setitem(STEPS, "count", Step(counted, ("pretrain",), ("count.value",)))
    CALLS.clear()
    project = study_project(tmp_path / "project", COUNTED, "counted")

    def run(study: dict | None = None) -> list[dict]:
        if study is not None:
            (project / "conf/studies/counted.yml").write_text(yaml.safe_dump(study))
        settings = parse_study_settings(
            {"name": "counted", "conf_source": str(project / "conf"), "storage_dir": str(tmp_path), "run_dir": str(tmp_path / "runs")}
        )
        results, failed, _ = run_study(read_study(project / "conf/studies/counted.yml"), settings, env_parameters(str(project / "conf"), "base"))
        return results, failed

    return run


def test_the_seed_grid_repeats_every_arm_over_each_combination_in_file_order(tmp_path):
    study = read_study(study_project(tmp_path / "p") / "conf/studies/tiny.yml")
    assert [unit.name for unit in units(study)] == [
        f"{arm}|pretrain.train.seed={p}|retrieval.seeds=[{f}]" for arm in ("scratch", "fdsl") for p in (0, 1) for f in (0, 1)
    ]


def test_a_complete_unit_is_reused_a_changed_arm_reruns_alone_a_failed_one_reruns(counting, caplog):
    results, failed = counting()
    assert sorted(CALLS) == [(1.0, 0), (1.0, 1), (2.0, 0), (2.0, 1)] and failed == []
    assert sorted(r["metrics"]["count.value"] for r in results) == [1.0, 2.0, 2.0, 3.0]
    CALLS.clear()
    counting()
    assert CALLS == []  # every unit complete with the same fingerprint
    changed = {**COUNTED, "arms": {"low": {"pretrain.optimizer.base_lr": 1.0}, "high": {"pretrain.optimizer.base_lr": 13.0}}}
    results, failed = counting(changed)
    assert sorted(CALLS) == [(13.0, 0), (13.0, 1)]  # only the changed arm runs; it fails
    assert sorted(failed) == ["high|pretrain.train.seed=0", "high|pretrain.train.seed=1"]
    assert "unit high|pretrain.train.seed=0 failed: RuntimeError: this arm fails" in caplog.text  # its error named, not only its name
    assert {r["arm"] for r in results} == {"low"}
    CALLS.clear()
    counting(changed)
    assert sorted(CALLS) == [(13.0, 0), (13.0, 1)]  # failed units run again


def test_the_first_arms_complete_before_the_others_and_one_failing_stops_the_study_before_they_start(counting):
    checked = {**COUNTED, "arms": {"check": {"pretrain.optimizer.base_lr": 13.0}, **COUNTED["arms"]}, "first": ["check"]}
    results, failed = counting(checked)
    assert sorted(CALLS) == [(13.0, 0), (13.0, 1)] and results == []  # the check failed: no other unit ran
    assert sorted(failed) == ["check|pretrain.train.seed=0", "check|pretrain.train.seed=1"]
    CALLS.clear()
    passing = {**checked, "arms": {**checked["arms"], "check": {"pretrain.optimizer.base_lr": 5.0}}}
    results, failed = counting(passing)
    assert CALLS[:2] == [(5.0, 0), (5.0, 1)] and len(CALLS) == 6 and failed == []  # the check first, then the rest


def test_an_unseeded_arm_runs_once_with_the_environments_seed(counting):
    results, _ = counting({**COUNTED, "arms": {**COUNTED["arms"], "once": {"pretrain.optimizer.base_lr": 7.0, "study.seeded": False}}})
    assert sorted(call for call in CALLS if call[0] == 7.0) == [(7.0, 0)]  # conf/base's seed 0, once
    assert [r["seeds"] for r in results if r["arm"] == "once"] == [{}]


def test_the_gpu_check_steps_rows_are_counted_by_the_status_under_its_header():
    from fdsml.tuning.study_steps import _status_counts

    table = "gpu_check --quick: device cpu (none)\ncheck                 status        detail\n"
    table += "pre-training resnet18  ok            76 img/s\nkernel alone          skipped       needs a CUDA device\n"
    table += "CouCE step            FAIL          RuntimeError: x\nrenderer              not run       budget spent\n"
    assert _status_counts(table) == {"ok": 1, "skipped": 1, "FAIL": 1, "not run": 1}


def test_units_differing_downstream_of_pretraining_share_its_run_folder_and_scratch_draws_its_trunk_from_the_seed(tmp_path):
    project = study_project(tmp_path / "p")
    study = read_study(project / "conf/studies/tiny.yml")
    settings = parse_study_settings({"name": "tiny", "conf_source": str(project / "conf"), "run_dir": str(tmp_path / "runs")})
    plans = plan_units(study, settings, env_parameters(str(project / "conf"), "base"))
    fdsl = [plan for plan in plans.values() if plan.unit.arm == "fdsl" and plan.unit.seeds["pretrain.train.seed"] == 0]
    assert len(fdsl) == 2 and fdsl[0].fingerprint != fdsl[1].fingerprint  # two fine-tuning seeds: two units
    assert fdsl[0].parameters["pretrain"] == fdsl[1].parameters["pretrain"]  # ... one pre-training (one run fingerprint)
    assert fdsl[0].parameters["pretrain"]["run_dir"] == str(tmp_path / "runs/pretrain")  # every study's, shared
    assert fdsl[0].parameters["retrieval"]["run_dir"] != fdsl[1].parameters["retrieval"]["run_dir"]
    scratch = {plan.unit.seeds["pretrain.train.seed"]: plan for plan in plans.values() if plan.unit.arm == "scratch"}
    trunks = [_trunk(scratch[seed].parameters, {}).state_dict() for seed in (0, 1, 0)]
    first = next(key for key, value in trunks[0].items() if value.dtype.is_floating_point)
    assert not torch.equal(trunks[0][first], trunks[1][first]) and torch.equal(trunks[0][first], trunks[2][first])
    # fine-tuning starts from that same trunk (the frozen probe's), so scratch's units differ by the pre-training seed too
    starts = [_start(scratch[seed].parameters, {}) for seed in (0, 1)]
    assert [start.name for start, _ in starts] == ["scratch", "scratch"]
    for seed, (_, payload) in zip((0, 1), starts):
        fine_tuned_trunk = trunk_state_dict(payload)
        probed_trunk = _trunk(scratch[seed].parameters, {}).backbone.state_dict()
        assert fine_tuned_trunk.keys() == probed_trunk.keys()
        assert all(torch.equal(fine_tuned_trunk[key], probed_trunk[key]) for key in probed_trunk)
    pretrained = {"payload": starts[0][1]}
    assert _start(fdsl[0].parameters, pretrained)[1] is pretrained["payload"]


def test_a_units_fingerprint_covers_the_objective_it_selects_and_no_other(tmp_path, monkeypatch):
    """An edit of fdsl's module re-keys the fdsl arm's units alone: the scratch arm's sections select pa_triplet."""
    from fdsml import fingerprints

    project = study_project(tmp_path / "p")
    settings = parse_study_settings({"name": "tiny", "conf_source": str(project / "conf"), "run_dir": str(tmp_path / "runs")})

    def keys() -> dict[str, str]:
        fingerprints.code_digest.cache_clear()
        plans = plan_units(read_study(project / "conf/studies/tiny.yml"), settings, env_parameters(str(project / "conf"), "base"))
        return {name: plan.fingerprint for name, plan in plans.items()}

    before = keys()
    original, edited = fingerprints.source_path, tmp_path / "fdsl.py"
    edited.write_text(original("fdsml.training.pretrain_objectives.fdsl").read_text() + "\nEDITED = True\n")
    monkeypatch.setattr(fingerprints, "source_path", lambda name: edited if name == "fdsml.training.pretrain_objectives.fdsl" else original(name))
    after = keys()
    monkeypatch.undo()
    fingerprints.code_digest.cache_clear()
    assert {name for name in before if after[name] != before[name]} == {name for name in before if name.startswith("fdsl|")}


def test_a_scale_runs_some_arms_with_fewer_seeds_and_its_overlay_last(tmp_path):
    study = {**TINY_STUDY, "scales": {"one": {"arms": ["fdsl"], "seeds": {"retrieval.seeds": [[3]]}, "overlay": {"pretrain.train.max_steps": 1}}}}
    project = study_project(tmp_path / "p", study)
    settings = parse_study_settings({"name": "tiny", "scale": "one", "conf_source": str(project / "conf")})
    plans = plan_units(read_study(project / "conf/studies/tiny.yml"), settings, env_parameters(str(project / "conf"), "base"))
    assert list(plans) == ["fdsl|pretrain.train.seed=0|retrieval.seeds=[3]", "fdsl|pretrain.train.seed=1|retrieval.seeds=[3]"]
    assert all(plan.parameters["pretrain"]["train"]["max_steps"] == 1 for plan in plans.values())


def test_the_descriptor_step_yields_the_generators_acceptance_and_the_agreement_per_filter():
    from fdsml.config import with_overlay
    from fdsml.tuning.study_steps import descriptor

    study = read_study(ROOT / "conf/studies/generator_variants.yml")
    params = with_overlay(with_overlay(env_parameters(str(ROOT / "conf"), "base"), study.overlay), study.scales["tiny"].overlay)
    metrics = descriptor(params, {})
    assert metrics["generation.failed"] == 0.0 and 0 < metrics["generation.class_filter_acceptance_rate"] <= 1
    assert {f"agreement.{name}" for name in ("all", "each", "same", "diff")} <= set(metrics)
    assert all(0 <= value <= 1 for key, value in metrics.items() if key.startswith(("agreement.", "label_rule_agreement.")))
    assert "label_rule_agreement.each" in metrics and "label_rule_agreement.same" not in metrics  # each alone has one same-class candidate
    # the same filter split by perturbed position: each group's own count, together every same triplet, pooling to the filter's agreement
    groups = [key for key in metrics if key.startswith("same_by_position.") and not key.endswith(".trials")]
    counts = [metrics[f"{group}.trials"] for group in groups]
    n_triplets = params["validate_descriptor"]["n_triplets"]
    assert groups and sum(counts) == n_triplets
    assert sum(metrics[group] * count for group, count in zip(groups, counts)) / n_triplets == pytest.approx(metrics["agreement.same"])


def test_two_units_with_one_pretraining_train_it_one_after_the_other_and_other_pretrainings_do_not_wait(tmp_path):
    events = []
    first_inside = threading.Event()

    def unit(label, definition, hold):
        with _only_trainer(str(tmp_path), definition):
            events.append(f"{label} in")
            first_inside.set()
            time.sleep(hold)
            events.append(f"{label} out")

    first = threading.Thread(target=unit, args=("a", {"pretrain": {"seed": 1}}, 0.5))
    first.start()
    first_inside.wait()
    same = threading.Thread(target=unit, args=("b", {"pretrain": {"seed": 1}}, 0.0))
    other = threading.Thread(target=unit, args=("c", {"pretrain": {"seed": 2}}, 0.0))
    same.start(), other.start()
    for thread in (first, same, other):
        thread.join()
    assert events.index("b in") > events.index("a out")  # the same pre-training waits for the one training it
    assert events.index("c out") < events.index("a out")  # another pre-training does not


STAGES = {"descriptor": ("generation", "triplets", "sweeps", "statistics"), "wide_range": ("generation", "sweeps", "statistics")}


def test_two_sweep_ranges_give_two_sweep_tables_with_their_factors_and_every_stage_its_cpu_seconds(tmp_path):
    """The generator study's file at its tiny scale: ``descriptor`` sweeps [0.6, 1.4], the named step ``wide_range``
    the sweeps alone over [0.2, 1.8], on the table ``descriptor`` generated; each table shows its own range's figures."""
    study_file = yaml.safe_load((ROOT / "conf/studies/generator_variants.yml").read_text())
    project = study_project(tmp_path / "p", study_file, "generator_variants")
    settings = parse_study_settings(
        {"name": "generator_variants", "scale": "tiny", "conf_source": str(project / "conf"), "storage_dir": str(tmp_path), "run_dir": str(tmp_path / "runs")}
    )
    study = read_study(project / "conf/studies/generator_variants.yml")
    results, failed, _ = run_study(study, settings, env_parameters(str(project / "conf"), "base"))
    assert failed == [] and [result["arm"] for result in results] == ["default", "one map"]
    for metrics in (result["metrics"] for result in results):
        assert (metrics["sweeps.lowest_factor"], metrics["sweeps.highest_factor"]) == (0.6, 1.4)
        assert (metrics["wide_range.sweeps.lowest_factor"], metrics["wide_range.sweeps.highest_factor"]) == (0.2, 1.8)
        assert metrics["sweeps.n_sweeps"] == metrics["wide_range.sweeps.n_sweeps"] == 2 * 6  # 2 base codes x 6 coefficients
        seconds = [f"cpu_seconds.{step}" for step in STAGES] + [f"cpu_seconds.{step}.{stage}" for step in STAGES for stage in STAGES[step]]
        assert all(metrics[key] >= 0 for key in seconds)
        assert metrics["cpu_seconds.descriptor"] >= sum(metrics[f"cpu_seconds.descriptor.{stage}"] for stage in STAGES["descriptor"])
    page, found = study_report(study, settings, results)
    narrow, wide = (f"Perturbation sweeps of the class codes, s in {r} (common seed)" for r in ("[0.6, 1.4]", "[0.2, 1.8]"))
    assert f"**{narrow}**" in page and f"**{wide}**" in page
    assert {row["arm"]: row["wide_range.sweeps.n_sweeps"] for row in found["more_tables"][wide]} == {"default": (12.0, 0.0), "one map": (12.0, 0.0)}
    wide_table = page.split(f"**{wide}**")[1].split("**")[0]
    assert "| default | 1 | 1 | 12.0 |" in wide_table  # a count is shown as it is, not x 100; one run, no spread
    seconds_table = page.split("**CPU seconds per stage")[1].split("Reproduce")[0]
    header, _, *rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in seconds_table.splitlines() if line.startswith("|")]
    columns = header[3:]
    assert columns == [f"cpu_seconds.descriptor.{stage}" for stage in STAGES["descriptor"]] + [
        "cpu_seconds.wide_range.sweeps", "cpu_seconds.wide_range.statistics", "cpu_seconds.descriptor", "cpu_seconds.wide_range"
    ]
    assert [row[0] for row in rows] == ["default", "one map"]
    for row in rows:
        assert len(row[3:]) == len(columns) and all(float(cell.split(" ± ")[0]) >= 0 for cell in row[3:])


def test_a_named_fine_tuning_keeps_its_own_run_folder_so_neither_overwrites_the_others_checkpoint(tmp_path):
    """``converged`` fine-tunes the same start with the same seed as ``finetune``: in one folder, each would find the
    other's checkpoint ("another configuration") and a unit stopped in either would train both again from step 0."""
    from fdsml.tuning.study_runner import run_step

    study = {
        **TINY_STUDY,
        "steps": ["finetune", "converged"],
        "named_steps": {"converged": {"step": "finetune", "overlay": {"retrieval.train.max_steps": 3}}},
        "arms": {"scratch": {}},
        "seeds": {"pretrain.train.seed": [0], "retrieval.seeds": [[0]]},
        "table": {"metrics": ["finetuned.recall@1"]},
    }
    project = study_project(tmp_path / "p", study)
    settings = parse_study_settings({"name": "tiny", "conf_source": str(project / "conf"), "run_dir": str(tmp_path / "runs")})
    (plan,) = plan_units(read_study(project / "conf/studies/tiny.yml"), settings, env_parameters(str(project / "conf"), "base")).values()
    unit = Path(plan.parameters["retrieval"]["run_dir"]).parent

    def checkpoints() -> dict[str, tuple[bytes, int]]:
        return {str(path.relative_to(unit)): (path.read_bytes(), path.stat().st_mtime_ns) for path in unit.rglob("last.pt")}

    first = run_step(plan, "finetune", {})
    (finetuned,) = checkpoints()
    assert finetuned.startswith("retrieval/")
    after_finetune = checkpoints()
    converged = run_step(plan, "converged", {})
    both = checkpoints()
    assert both[finetuned] == after_finetune[finetuned]  # untouched: same bytes, never rewritten
    (own,) = set(both) - {finetuned}
    assert own.startswith("converged/retrieval/")
    assert converged["converged.finetuned.recall@1"] >= 0.0
    again = run_step(plan, "finetune", {})  # the finished run is reused from its folder, not trained again
    assert checkpoints() == both and again["finetuned.recall@1"] == first["finetuned.recall@1"]


def keys_on_both_machines(project, monkeypatch) -> tuple[dict[str, str], ...]:
    """Each unit's key as a machine without native bf16 plans it, then as one with it."""
    settings = parse_study_settings({"name": "tiny", "conf_source": str(project / "conf")})
    keys = []
    for native_bf16 in (False, True):
        monkeypatch.setattr(study_runner, "device_has_bf16", lambda device, native=native_bf16: native)
        plans = plan_units(read_study(project / "conf/studies/tiny.yml"), settings, env_parameters(str(project / "conf"), "base"))
        keys.append({name: plan.fingerprint for name, plan in plans.items()})
    return tuple(keys)


@pytest.mark.parametrize("amp", [True, False])
def test_a_unit_trained_in_bf16_has_another_key_than_on_a_float32_machine_and_a_float32_unit_one_key(tmp_path, monkeypatch, amp):
    study = {**TINY_STUDY, "overlay": {**TINY_STUDY["overlay"], "pretrain.train.amp": amp, "retrieval.train.amp": amp}}
    on_float32_machine, on_bf16_machine = keys_on_both_machines(study_project(tmp_path / "p", study), monkeypatch)
    assert len(on_float32_machine) == 8
    params = {section: {"train": {"amp": amp, "device": "cpu"}} for section in ("pretrain", "retrieval")}
    steps = ((params, STEPS["pretrain"]), (params, STEPS["finetune"]))
    assert study_runner.computes_bf16(steps) == ({"pretrain": True, "retrieval": True} if amp else {})
    monkeypatch.setattr(study_runner, "device_has_bf16", lambda device: False)
    assert study_runner.computes_bf16(steps) == {}  # a float32 machine adds nothing: its units keep the keys they had
    if amp:  # every unit fine-tunes (scratch too), so every unit would train in bf16 on the second machine
        assert all(on_bf16_machine[name] != key for name, key in on_float32_machine.items())
    else:
        assert on_bf16_machine == on_float32_machine


def test_a_named_step_that_turns_amp_on_gives_its_unit_a_bf16_key(tmp_path, monkeypatch):
    study = {**TINY_STUDY, "overlay": {**TINY_STUDY["overlay"], "pretrain.train.amp": False, "retrieval.train.amp": False},
             "steps": ["pretrain", "finetune", "in_bf16"], "named_steps": {"in_bf16": {"step": "finetune", "overlay": {"retrieval.train.amp": True}}}}
    on_float32_machine, on_bf16_machine = keys_on_both_machines(study_project(tmp_path / "p", study), monkeypatch)
    in_bf16 = {name for name in on_float32_machine if name.startswith("fdsl")}  # scratch's own steps leave in_bf16 out
    assert len(in_bf16) == 4 and all(on_bf16_machine[name] != on_float32_machine[name] for name in in_bf16)
    assert all(on_bf16_machine[name] == key for name, key in on_float32_machine.items() if name not in in_bf16)  # float32 throughout
