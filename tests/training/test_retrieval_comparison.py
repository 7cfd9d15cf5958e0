"""The retrieval comparison: baselines on the same split, each start at its own rate, a budget sized to the data,
spreads only where seeds ran, and a dataset too small for the recipe refused before any work."""

import json

import numpy as np
import pytest
import torch

from fdsml.config import ConfigError, env_parameters
from fdsml.data import ImageRecords, image_records
from fdsml.evaluation.frozen_probe import frozen_probe
from fdsml.models import build_model, model_payload
from fdsml.models.starting_points import StartingPoint, build_from_start, trunk_digest
from fdsml.pipelines.run_checks import RunCheckError, check_run
from fdsml.training.retrieval import compare_starting_points, embed, load_splits, parse_retrieval_params, plan_retrieval
from fdsml.training.retrieval_comparison import check_recipe_fits, comparison_table, recipe_notes, retrieval_comparison

from tests.own_images import write_image_folder
from tests.support import ROOT, TINY_RETRIEVAL

TINY = TINY_RETRIEVAL


@pytest.fixture(scope="module")
def pretrained():
    torch.manual_seed(123)  # a trunk unlike the scratch start's seed-0 initialisation
    return model_payload(build_model("resnet18", embedding_dim=4, img_size=16), objective="pa_triplet")


def _config(tmp_path, **changes):
    return parse_retrieval_params(TINY | {"run_dir": str(tmp_path / "runs")} | changes)


def test_the_baselines_are_raw_pixels_and_each_trunk_before_fine_tuning_on_the_same_queries(tmp_path, pretrained, caplog):
    config = _config(tmp_path)
    with caplog.at_level("INFO"):
        metrics, history, _ = retrieval_comparison(config, pretrained)
    splits = load_splits(config)
    first = caplog.records[0].getMessage()
    assert first.startswith("Retrieval on digits: budget: 2 steps (retrieval.train.max_steps); batch: 64")
    assert "rates: scratch 0.0001 (retrieval.optimizer.base_lr); fdsml 0.0001 (retrieval.optimizer.base_lr)" in first
    for name, trunk in (
        ("scratch", build_from_start(StartingPoint("scratch"), seed=0, img_size=16, head="embedding", embedding_dim=8)),
        ("fdsml", build_from_start(StartingPoint("fdsml", "pretrained_model"), payload=pretrained, seed=0, img_size=16)),
    ):
        result = metrics[name]
        frozen = frozen_probe(trunk, splits, 16, crop_fraction=config.data.crop_fraction)
        assert result["baselines"]["its frozen trunk"]["mean"] == pytest.approx(frozen)  # the trunk the run started from
        pixels = result["baselines"]["raw pixels"]["mean"]
        assert pixels["recall@1"] > 0.9  # digits' 8 x 8 pixels sort themselves
        for baseline, found in result["versus"].items():
            base = result["baselines"][baseline]["mean"]["recall@1"]
            assert found["difference"] == pytest.approx(result["mean"]["recall@1"] - base)  # paired over the same queries
            assert 0 < found["se"] < 0.05
        # two steps cannot beat the pixels: the verdict says so, in the metrics and the log
        assert result["verdict"].startswith(f"fine-tuning did not help: {name} fine-tuned reaches Recall@1")
        assert "raw pixels at" in result["verdict"] and "most likely at fault: too few steps" in result["verdict"]
        assert result["verdict"] in caplog.text
        assert result["rate"] == {"base_lr": 1e-4, "learning_rate": pytest.approx(1e-4 * 64 / 32), "source": "retrieval.optimizer.base_lr"}
    assert result["queries"] == len(splits.test) and result["std"] is None  # one seed: no spread
    table = comparison_table(metrics)
    rows = table.split("\n\n")[1].splitlines()
    assert [row.split(" |")[0] for row in rows[2:]] == [
        "| raw pixels (k-NN)", "| scratch, frozen trunk", "| scratch, fine-tuned", "| fdsml, frozen trunk", "| fdsml, fine-tuned"
    ]  # fmt: skip
    assert "1 seed, no spread measured" in table and not any("±" in row for row in rows)
    assert table.count("Fine-tuning did not help: ") == 2
    assert set(history["start"]) == {"scratch", "fdsml"}


def _two_seeds(rate: dict) -> dict:
    """A start's metrics over seeds 0 and 1 (R@1 10 and 15 %), as the comparison writes them."""
    seeds = {"0": {"recall@1": 0.10, "map@r": 0.02}, "1": {"recall@1": 0.15, "map@r": 0.04}}
    frozen = {"seeds": {"0": {"recall@1": 0.05, "map@r": 0.01}}, "mean": {"recall@1": 0.05, "map@r": 0.01}, "std": None}
    return {
        "dataset": "toy", "rate": rate, "steps": 100, "queries": 200, "seeds": seeds,
        "mean": {"recall@1": 0.125, "map@r": 0.03}, "std": {"recall@1": 0.0353553, "map@r": 0.0141421},
        "baselines": {"raw pixels": {"mean": {"recall@1": 0.2, "map@r": 0.05}, "std": None}, "its frozen trunk": frozen},
        "versus": {
            "raw pixels": {"metric": "recall@1", "baseline": 0.2, "difference": -0.075, "se": 0.031},
            "its frozen trunk": {"metric": "recall@1", "baseline": 0.05, "difference": 0.075, "se": 0.02},
        },
        "verdict": None,
    }  # fmt: skip


def test_two_seeds_print_mean_and_std_and_the_differences_their_standard_errors():
    rate = {"base_lr": 3e-4, "learning_rate": 3e-4, "source": "chosen on validation"}
    table = comparison_table({"fdsml": _two_seeds(rate)})
    assert "mean ± standard deviation over 2 seeds" in table and "1 seed" not in table
    assert "| fdsml, fine-tuned | 0.0003 (chosen on validation) | 12.5 ± 3.5 | 3.0 ± 1.4 |" in table
    assert "| raw pixels (k-NN) | | 20.0 | 5.0 |" in table  # no seed, no spread
    assert "| fdsml | -7.5 ± 3.1 | +7.5 ± 2.0 |" in table and "and over the seeds" in table


def test_each_start_fine_tunes_at_its_own_rate_chosen_on_training_classes_or_set_by_hand(tmp_path, pretrained):
    starts = [{"name": "scratch", "backbone": "resnet18"}, {"name": "fdsml", "checkpoint": "pretrained_model", "base_lr": 0.01}]
    config = _config(tmp_path, starts=starts, rate_search={"rates": [1e-4, 3e-3], "validation_fraction": 0.4})
    metrics, history, _ = retrieval_comparison(config, pretrained)
    scratch, fdsml = metrics["scratch"]["rate"], metrics["fdsml"]["rate"]
    search = scratch["search"]
    assert scratch["source"] == "chosen on validation" and scratch["base_lr"] == search["chosen"] in (1e-4, 3e-3)
    assert set(search["rates"]) == {"0.0001", "0.003"} and search["metric"] == "map@r" and search["seconds"] > 0
    assert search["validation"] == "2 of the 5 training classes held out (355 images)"  # digits 0-4 train: 5-9 are never read
    best = max(search["rates"], key=lambda rate: search["rates"][rate]["map@r"])
    assert float(best) == search["chosen"]
    assert fdsml == {"base_lr": 0.01, "learning_rate": pytest.approx(0.02), "source": "retrieval.starts[1].base_lr"}
    # each final run trained at its start's rate: the rate of its first step, before the schedule decays it
    first_steps = history[history["step"] == 1].set_index("start")["lr"]
    assert first_steps["scratch"] == pytest.approx(search["chosen"] * 2) and first_steps["fdsml"] == pytest.approx(0.02)
    searched = sorted(p.parent.name for p in (tmp_path / "runs" / "digits" / "rate_search").glob("*/last.pt"))
    assert searched == ["scratch_lr0.0001_seed0", "scratch_lr0.003_seed0"]  # the start with its own rate was not searched
    assert "| scratch | " in comparison_table(metrics).split("Rates chosen on validation (map@r, %, on 2 of the 5")[1]


def _own_params(root, **changes) -> dict:
    params = env_parameters(str(ROOT / "conf"), "base")["retrieval"]
    return params | {"data": params["data"] | {"dataset": "imagefolder", "root": str(root)}} | changes


def test_the_budget_follows_the_epochs_on_your_own_data_and_the_cap_stays_with_the_embedded_demonstration(tmp_path):
    own = parse_retrieval_params(_own_params(write_image_folder(tmp_path / "shapes", classes=40, per_class=2)))
    splits = load_splits(own)
    plan = plan_retrieval(own, len(splits.train), 1)
    assert plan.total_steps == 30 * (40 // 14) == own.train.epochs * plan.batches_per_replica  # 40 training images, 30 epochs
    assert recipe_notes(own, splits)[0] == "budget: 30 epochs of the training split (retrieval.train.epochs)"
    assert "data: training 20 classes of 2 images (40); test 20 classes of 2 images (40)" in recipe_notes(own, splits)
    embedded = parse_retrieval_params(env_parameters(str(ROOT / "conf"), "base")["retrieval"])
    assert plan_retrieval(embedded, 2720, 1).total_steps == 120
    assert recipe_notes(embedded)[0] == "budget: 120 steps, the embedded demonstration's cap (retrieval.demo_max_steps.omniglot)"
    cpu = parse_retrieval_params(env_parameters(str(ROOT / "conf"), "cpu")["retrieval"])
    assert plan_retrieval(cpu, 2720, 1).total_steps == 388 and cpu.rate_search is not None and embedded.rate_search is None


@pytest.mark.parametrize(
    "per_class, changes, message",
    [
        (1, {}, "fewer than two test images have another image of their class"),
        (2, {"train": {"epochs": 1, "freeze_backbone_steps": 16}}, r"head-only warm-up \(16 steps\) is not shorter than training \(4 steps\)"),
        (2, {"rate_search": {"rates": [1e-4, 1e-3]}}, r"retrieval.rate_search: the 2 training classes .* cannot give two validation classes"),
    ],
)
def test_a_dataset_too_small_for_the_recipe_stops_before_any_work_with_the_fix(tmp_path, per_class, changes, message):
    params = _own_params(write_image_folder(tmp_path / "few", classes=4 if "rate_search" in changes else 8, per_class=per_class))
    data = params["data"] | {"batch_size": 2, "ks": [1, 2]}
    others = {key: value for key, value in changes.items() if key != "train"}  # the parameter's dict left as given
    params = params | {"data": data, "train": params["train"] | changes.get("train", {})} | others
    config = parse_retrieval_params(params)
    with pytest.raises(ConfigError, match=message):
        check_recipe_fits(config, load_splits(config), 1)
    with pytest.raises(RunCheckError, match=message):  # kedro run's checks before its first node, and kedro check's
        check_run({"retrieval": params}, reads={"retrieval"})


def test_comparing_starts_fine_tunes_each_with_every_seed_at_its_own_rate(tmp_path, pretrained):
    """The tuning's and the study's comparison (no baselines): each start, each seed, the mean over the seeds, the
    rate and the key it came from, and the first seed's model file."""
    starts = [{"name": "scratch", "backbone": "resnet18"}, {"name": "quick", "checkpoint": "pretrained_model", "base_lr": 0.01}]
    settings = {"starts": starts, "seeds": [0, 1], "run_dir": str(tmp_path / "runs"), "live_dir": str(tmp_path / "live")}
    config = parse_retrieval_params(TINY | settings | {"embedding": {"embedding_dim": 4}})
    metrics, history, models = compare_starting_points(config, pretrained)
    assert list(metrics) == ["scratch", "quick"]
    sources = {"scratch": (config.optimizer.base_lr, "retrieval.optimizer.base_lr"), "quick": (0.01, "retrieval.starts[1].base_lr")}
    for name, entry in metrics.items():
        assert (entry["rate"]["base_lr"], entry["rate"]["source"]) == sources[name]
        assert (entry["dataset"], entry["steps"], set(entry["seeds"])) == ("digits", 2, {"0", "1"})
        for key, mean in entry["mean"].items():
            assert mean == pytest.approx(np.mean([entry["seeds"][seed][key] for seed in ("0", "1")]))
        assert set(entry["std"]) == set(entry["mean"]) and "baselines" not in entry
        assert (models[name]["metadata"]["start"], models[name]["metadata"]["seed"]) == (name, 0)
    assert sorted(set(zip(history["start"], history["seed"]))) == [("quick", 0), ("quick", 1), ("scratch", 0), ("scratch", 1)]
    assert history.index.tolist() == list(range(len(history)))  # the runs' rows under one index
    assert metrics["quick"]["trunk_digest"] == trunk_digest(pretrained) and metrics["scratch"]["trunk_digest"] == ""
    live = json.loads((tmp_path / "live" / "metrics.json").read_text())
    assert live["digits"]["quick_seed1"]["recall@1"] == pytest.approx(metrics["quick"]["seeds"]["1"]["recall@1"])


def test_the_plugin_a_retrieval_selects_is_its_datasets_reader():
    assert parse_retrieval_params({"data": {"dataset": "omniglot"}}).plugin_modules() == ("fdsml.data.readers.omniglot",)


class _ViewMeans(torch.nn.Module):
    """A 'model' whose embedding is each image's mean colour: which pixels it was shown, read off its output."""

    def __init__(self):
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # the device embedding reads

    def forward(self, images):
        return images.mean(dim=(2, 3)) + self.anchor


def test_embeddings_are_of_the_test_view_never_the_training_one():
    """A left-to-right ramp: the centre crop's mean is the ramp's middle; a random crop's would wander."""
    ramp = np.broadcast_to(np.linspace(0, 255, 40, dtype=np.uint8)[None, :, None], (30, 40, 3))
    records = ImageRecords(labels=np.arange(6) % 2, images=np.stack([ramp] * 6))
    config = parse_retrieval_params(TINY | {"data": TINY["data"] | {"image_size": 16, "crop_fraction": 0.5, "flip": True}})
    expected = image_records.test_view(torch.from_numpy(ramp.copy()).permute(2, 0, 1), 16, 0.5).float().mean(dim=(1, 2)) / 255
    embedded = embed(_ViewMeans(), records, config)
    np.testing.assert_allclose(embedded, np.broadcast_to(expected.numpy(), (6, 3)), rtol=0, atol=1e-6)


def test_the_test_images_are_embedded_in_the_evaluation_batch_and_loaders_and_scored_at_the_seed_and_threads_asked(monkeypatch):
    """``data.eval_batch_size`` and ``eval_workers`` reach the embedding loop, ``data.faiss_threads`` and the caller's
    seed (the clustering's, for NMI) the metrics."""
    from fdsml.data import RetrievalSplits
    from fdsml.training import retrieval

    embedded, scored = [], []

    def outputs(model, dataset, *, batch_size, device, workers):
        embedded.append((len(dataset), batch_size, workers))
        return torch.zeros(len(dataset), 3), torch.zeros(len(dataset))

    def scores(embed_records, splits, *, seed, threads):
        scored.append((embed_records(splits.test).shape, seed, threads))
        return {"recall@1": 1.0}, np.ones(len(splits.test.labels), bool)

    monkeypatch.setattr(retrieval, "model_outputs", outputs)
    monkeypatch.setattr(retrieval, "retrieval_split_scores", scores)
    records = ImageRecords(labels=np.arange(6) % 2, images=np.zeros((6, 20, 20, 3), np.uint8))
    config = parse_retrieval_params(TINY | {"data": TINY["data"] | {"eval_batch_size": 5, "eval_workers": 1, "faiss_threads": 2}})
    assert retrieval.evaluate(_ViewMeans(), RetrievalSplits("toy", records, (1,), test=records), config, seed=7) == {"recall@1": 1.0}
    assert embedded == [(6, 5, 1)] and scored == [((6, 3), 7, 2)]


def _coloured(angles_deg) -> np.ndarray:
    """One flat image per angle: red cos, green sin (x 200), so that a mean-colour embedding's cosine orders them by angle."""
    angles = np.radians(np.asarray(angles_deg, dtype=np.float64))
    colours = np.stack([200 * np.cos(angles), 200 * np.sin(angles), np.zeros_like(angles)], axis=1).round().astype(np.uint8)
    return np.broadcast_to(colours[:, None, None, :], (len(angles), 20, 20, 3)).copy()


def test_the_example_figure_shows_seeded_queries_and_their_nearest_gallery_images_never_themselves(monkeypatch):
    """A test set searched against itself: each chosen query's k nearest others by cosine of mean colour, in order,
    without the query; a query set searched against its gallery; every image drawn as it was read (channels first)."""
    from fdsml.data import RetrievalSplits
    from fdsml.training import retrieval

    drawn = []
    monkeypatch.setattr(retrieval, "top_k_figure", lambda *parts: drawn.append(parts) or "figure")
    angles = [0, 5, 15, 30, 50, 75, 90]
    records = ImageRecords(labels=np.array([0, 0, 1, 1, 2, 2, 3]), images=_coloured(angles))
    config = parse_retrieval_params(TINY | {"seeds": [4], "n_example_queries": 3, "data": TINY["data"] | {"image_size": 16, "crop_fraction": 0.5}})
    assert retrieval.retrieval_examples(_ViewMeans(), RetrievalSplits("toy", records, (1,), test=records), config, k=2) == "figure"
    query_images, query_labels, gallery_images, gallery_labels, neighbours = drawn[0]
    chosen = np.random.default_rng(4).choice(7, size=3, replace=False)
    nearest = {i: sorted((j for j in range(7) if j != i), key=lambda j: (abs(angles[j] - angles[i]), j))[:2] for i in range(7)}
    assert neighbours.tolist() == [nearest[i] for i in chosen] and query_labels.tolist() == records.labels[chosen].tolist()
    view = lambda i: records.images[i].transpose(2, 0, 1)
    assert all(np.array_equal(image, view(i)) for image, i in zip(query_images, chosen))
    assert sorted(gallery_images) == sorted({j for i in chosen for j in nearest[i]})
    assert all(np.array_equal(gallery_images[j], view(j)) for j in gallery_images) and gallery_labels is records.labels
    split = RetrievalSplits("toy", records, (1,), query=records.subset(np.array([1, 4])), gallery=records.subset(np.array([0, 2, 6])))
    retrieval.retrieval_examples(_ViewMeans(), split, parse_retrieval_params(TINY | {"n_example_queries": 5}), k=2)
    _, query_labels, _, _, neighbours = drawn[1]
    by_query = dict(zip(query_labels.tolist(), neighbours.tolist()))  # gallery angles 0, 15, 90; queries at 5 and 50
    assert by_query == {0: [0, 1], 2: [1, 2]}


def test_a_start_is_fine_tuned_with_one_proxy_per_training_class_on_its_plan_and_each_seed_scored_at_that_seed(tmp_path, monkeypatch):
    """The task is built for the training split's classes (one proxy each), every seed's run follows the start's plan,
    and each fine-tuned model is scored at its own seed (the clustering's, for NMI)."""
    import pandas as pd
    from types import SimpleNamespace

    from fdsml.training import retrieval

    built, trained, scored = [], [], []
    monkeypatch.setattr(retrieval, "fine_tuning", lambda config, n_classes: built.append(n_classes) or "task")

    def finetune(task, train, run, *, pretrained, plan, live):
        trained.append((task, run.seed, plan))
        return SimpleNamespace(model=build_model("resnet18", embedding_dim=4, img_size=16), history=pd.DataFrame({"step": [1]})), None

    def scores(model, splits, config, seed):
        scored.append(seed)
        return {"recall@1": seed / 10}, np.ones(1, bool)

    monkeypatch.setattr(retrieval, "finetune", finetune)
    monkeypatch.setattr(retrieval, "evaluate_scores", scores)
    config = _config(tmp_path, seeds=[3, 5])
    splits = load_splits(config)
    result = retrieval.finetune_start(config, splits, config.starts[0])
    assert built == [len(np.unique(splits.train.labels))] == [int(splits.train.labels.max()) + 1]
    assert [(task, seed) for task, seed, _ in trained] == [("task", 3), ("task", 5)]
    assert all(plan is result.plan for _, _, plan in trained) and scored == [3, 5]
    assert result.per_seed == {"3": {"recall@1": 0.3}, "5": {"recall@1": 0.5}}


def test_each_seed_of_a_start_is_scored_logged_and_sent_live_under_its_own_folder(tmp_path, pretrained, caplog):
    """Two fine-tuning seeds of one start: each its metrics (keyed by the seed), its log line, its live scores and rows;
    the histories stacked under one index with their dataset, start and seed; the model file of the first seed."""
    from fdsml import distributed
    from fdsml.training.live import live_metrics
    from fdsml.training.retrieval import finetune_start

    config = _config(tmp_path, seeds=[0, 1], live_dir=str(tmp_path / "live"))
    start = config.starts[1]  # fdsml: the pre-trained trunk, whose checkpoint the model file names
    live = live_metrics(config.live_dir, config, distributed.setup("cpu"))
    with caplog.at_level("INFO", logger="fdsml.training.retrieval"):
        result = finetune_start(config, load_splits(config), start, pretrained, live=live)
    assert list(result.per_seed) == ["0", "1"] and result.per_seed["0"] != result.per_seed["1"]
    for seed, metrics in result.per_seed.items():
        line = f"fdsml seed {seed}: " + ", ".join(f"{name} {100 * value:.1f}" for name, value in metrics.items())
        assert line in caplog.messages
        live_scores = json.loads((tmp_path / "live" / "metrics.json").read_text())["digits"][f"fdsml_seed{seed}"]
        assert {name: live_scores[name] for name in metrics} == pytest.approx(metrics)
        assert (tmp_path / "live" / "plots" / "metrics" / "digits" / f"fdsml_seed{seed}" / "loss.tsv").is_file()
    history = result.history
    assert history.index.tolist() == list(range(len(history))) and history["seed"].tolist() == [0, 0, 1, 1]
    assert set(history["dataset"]) == {"digits"} and set(history["start"]) == {"fdsml"}
    assert {key: result.model["metadata"][key] for key in ("start", "checkpoint", "seed")} == {"start": "fdsml", "checkpoint": "pretrained_model", "seed": 0}
