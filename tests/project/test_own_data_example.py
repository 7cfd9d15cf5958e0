"""docs/own-data.md's worked example, run as the page writes it: its conf/local file and `kedro run --pipelines=retrieval`
in a fresh copy of the project, on a tiny folder of generated PNGs."""

import json
import re

import pytest
import torch

from fdsml.models import build_model, model_payload
from fdsml.models.checkpoint import save_checkpoint

from tests.fresh_clone import fresh_clone, run
from tests.own_images import write_image_folder
from tests.support import ROOT

PAGE = ROOT / "docs" / "own-data.md"


def _worked_example() -> tuple[str, str, list[str]]:
    """The example section's YAML file (its path from the first comment line) and its kedro commands."""
    section = PAGE.read_text().split("## A worked example", 1)[1].split("\n## ", 1)[0]
    yaml_text = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    path = re.match(r"# (conf/local/\S+\.yml)\n", yaml_text).group(1)
    commands = [line.split("#")[0].strip() for line in re.search(r"```bash\n(.*?)```", section, re.S).group(1).splitlines()]
    return path, yaml_text, commands


@pytest.mark.slow  # a fresh copy and a kedro process: about a minute on 2 busy cores
def test_the_worked_example_fine_tunes_on_the_folder_and_names_it_in_every_output(tmp_path):
    project = fresh_clone(tmp_path / "project")
    path, yaml_text, commands = _worked_example()
    assert commands == ["kedro run --pipelines=pretrain", "kedro run --pipelines=retrieval"]
    write_image_folder(project / "data/01_raw/shapes", classes=6, per_class=5)
    (project / path).write_text(yaml_text)
    # Stand-in for the page's first command (a minute of pre-training): a ResNet-18 model file where pretrain writes it.
    torch.manual_seed(0)
    save_checkpoint(project / "data/06_models/pretrained_model.pt", model_payload(build_model("resnet18"), objective="pa_triplet"))
    code, output = run(commands[1], project)
    assert code == 0, output[-3000:]
    metrics = json.loads((project / "data/08_reporting/retrieval_metrics.json").read_text())
    assert list(metrics) == ["scratch", "fdsml"]
    for start in metrics.values():
        assert start["dataset"] == "imagefolder-shapes"
        assert set(start["mean"]) == {"recall@1", "recall@2", "recall@4", "map@r", "r_precision", "nmi"}
        assert all(0 <= value <= 1 for value in start["mean"].values())
        assert start["mean"]["recall@4"] >= start["mean"]["recall@1"]
    assert (project / "data/08_reporting/retrieval_table.md").read_text().startswith("Retrieval on `imagefolder-shapes`:")
    runs = project / "data/06_models/retrieval_runs/imagefolder-shapes"
    assert {p.name for p in runs.iterdir()} == {"scratch_seed0", "fdsml_seed0"}
