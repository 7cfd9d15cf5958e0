"""``pretrain.data.source: device``: the loader ships packed codes and the step renders them; on the
CPU the Numba renderer does it, so the whole path runs here and must train the same weights."""

import logging

import numpy as np
import torch

from fdsml.data import FractalCodesDataset
from fdsml.data.device_render import DeviceRenderedCodes, renders_on_device
from fdsml.families import family_spec
from fdsml.training.pretrain import pretrain

from tests.support import TINY_SPEC
from .helpers import tiny_config


def test_device_batches_are_the_loaders_images(tiny_table):
    indices = np.arange(len(tiny_table))[::2]
    shipped = DeviceRenderedCodes(tiny_table, TINY_SPEC, seed=5, fresh_noise=True, img_size=24)
    rendered = FractalCodesDataset(tiny_table, TINY_SPEC, seed=5, fresh_noise=True, img_size=24)
    for dataset in (shipped, rendered):
        dataset.set_epoch(3)
    batch = shipped.collated_items(indices)
    assert batch["image"].dtype == torch.int64  # codes and seeds, not pixels
    expected = rendered.model_input(rendered.collated_items(indices)["image"])
    assert torch.equal(shipped.model_input(batch["image"]), expected)
    one = shipped[int(indices[1])]["image"]
    assert torch.equal(shipped.model_input(one[None]), expected[1:2])


def test_the_device_source_trains_the_weights_of_the_render_source(tiny_table, tmp_path):
    payloads = {}
    for source in ("render", "device"):
        config = tiny_config(
            tmp_path / source,
            data={"source": source, "fresh_noise": True},
            model={"img_size": 24},
            train={"max_steps": 3, "checkpoint_every": 100},
        )
        payloads[source], _ = pretrain(tiny_table, TINY_SPEC, config)
    for name, value in payloads["render"]["state_dict"].items():
        assert torch.equal(value, payloads["device"]["state_dict"][name]), name


def test_a_family_without_a_gpu_kernel_renders_in_the_loader_and_says_so(caplog):
    with caplog.at_level(logging.WARNING, logger="fdsml.data.device_render"):
        assert not renders_on_device(family_spec({"family": "visual_atom"}), "table")
        assert not renders_on_device(TINY_SPEC, "fresh")
        assert renders_on_device(TINY_SPEC, "table")
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2 and "no GPU kernel" in messages[0] and "fresh instances" in messages[1]
