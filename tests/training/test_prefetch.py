"""The prefetcher: batches one ahead, in the loader's order, each through ``model_input`` once; on CUDA
the step waits on the side stream's event and keeps the tensors for its own stream (checked here with a
recording stand-in for torch.cuda's streams); on the CPU no stream is touched."""

import contextlib

import pytest
import torch
from torch import nn

from fdsml.data import ShuffledBatchSampler
from fdsml.data.epoch_items import EpochBatches, epoch_loader
from fdsml.training import prefetch as prefetch_module
from fdsml.training.loop import train
from fdsml.training.loop_config import LoopConfig, OptimizerConfig
from fdsml.training.prefetch import Prefetcher
from fdsml.training.training_plan import PlanKeys, plan_training

ITEMS, BATCH = 16, 4


def _batch(first: int) -> dict:
    indices = torch.arange(first, first + 2)
    return {"image": indices.float()[:, None, None, None].expand(-1, 1, 2, 2).clone(), "index": indices, "name": "b"}


class Recorded:
    """A ``model_input`` that logs the first index of every batch it converts (and the active stream)."""

    def __init__(self, log: list, streams=None):
        self.log, self.streams = log, streams

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        where = self.streams.active if self.streams is not None else None
        self.log.append(("prepare", int(images[0, 0, 0, 0]), where))
        return images * 10 + 1


def test_the_cpu_path_prepares_each_batch_once_one_ahead_and_touches_no_stream(monkeypatch):
    def no_streams(device):
        raise AssertionError("a stream API was touched on the CPU")

    monkeypatch.setattr(prefetch_module, "CudaStreams", no_streams)
    log: list = []
    batches = [_batch(first) for first in (0, 2, 4)]
    taken = []
    for staged in Prefetcher(torch.device("cpu"), model_input=Recorded(log))(iter(batches)):
        log.append(("take", int(staged.batch["index"][0]), None))
        taken.append(staged.take())
    assert log == [("prepare", 0, None), ("prepare", 2, None), ("take", 0, None), ("prepare", 4, None),
                   ("take", 2, None), ("take", 4, None)]  # fmt: skip
    for batch, got in zip(batches, taken):
        assert torch.equal(got["image"], batch["image"] * 10 + 1) and torch.equal(got["index"], batch["index"])
        assert got["name"] == "b"


class FakeEvent:
    def __init__(self, number: int):
        self.number = number


class FakeStream:
    def __init__(self, name: str, log: list):
        self.name, self.log, self.events = name, log, 0

    def record_event(self) -> FakeEvent:
        self.events += 1
        self.log.append(("record", self.name, self.events))
        return FakeEvent(self.events)

    def wait_event(self, event: FakeEvent) -> None:
        self.log.append(("wait", self.name, event.number))


class FakeStreams:
    """torch.cuda's stream calls as :class:`~fdsml.training.prefetch.CudaStreams` makes them, recorded."""

    def __init__(self, log: list):
        self.log, self.active = log, "consumer"
        self.consumer, self.kept = FakeStream("consumer", log), []

    def new_stream(self) -> FakeStream:
        return FakeStream("side", self.log)

    @contextlib.contextmanager
    def using(self, stream: FakeStream):
        self.active = stream.name
        yield
        self.active = "consumer"

    def current(self) -> FakeStream:
        return self.consumer

    def keep_for(self, tensor, stream) -> None:
        self.kept.append((tensor, stream.name))


def test_on_cuda_the_step_waits_on_the_side_streams_event_and_keeps_the_tensors_for_its_stream():
    log: list = []
    streams = FakeStreams(log)
    prefetcher = Prefetcher(torch.device("cpu"), model_input=Recorded(log, streams), streams=streams)
    for staged in prefetcher(iter([_batch(0), _batch(2)])):
        first = int(staged.batch["index"][0])
        assert ("wait", "consumer", first // 2 + 1) not in log  # not waited for before the step takes it
        batch = staged.take()
        assert log[-1] == ("wait", "consumer", first // 2 + 1)  # this batch's own event, before the step uses it
        assert [(id(tensor), where) for tensor, where in streams.kept[-2:]] == [
            (id(batch["image"]), "consumer"), (id(batch["index"]), "consumer")
        ]  # fmt: skip
        assert torch.equal(batch["image"], _batch(first)["image"] * 10 + 1)
    prepared = [entry for entry in log if entry[0] != "wait"]
    assert prepared == [("prepare", 0, "side"), ("record", "side", 1), ("prepare", 2, "side"), ("record", "side", 2)]
    assert len(streams.kept) == 4


class Indexed(torch.utils.data.Dataset):
    """Items whose image is their index; it logs every index read and every batch ``model_input`` converts."""

    def __init__(self):
        self.read: list[int] = []
        self.converted: list[list[int]] = []

    def __len__(self):
        return ITEMS

    def __getitem__(self, index):
        self.read.append(int(index))
        return {"image": torch.full((1, 2, 2), float(index)), "index": int(index)}

    def model_input(self, images):
        self.converted.append(images[:, 0, 0, 0].long().tolist())
        return images * 10 + 1


class Seen(nn.Module):
    """A loss that logs the items of every batch the step trains on, after checking the image is ``model_input``'s."""

    def __init__(self):
        super().__init__()
        self.batches: list[list[int]] = []

    def forward(self, model, batch, step=0):
        assert torch.equal(batch["image"], batch["index"].float()[:, None, None, None].expand(-1, 1, 2, 2) * 10 + 1)
        self.batches.append(batch["index"].tolist())
        return model(batch["image"] / 200).pow(2).mean(), {}

    def param_groups(self):
        return []


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone, self.head, self.config = nn.Linear(4, 3), nn.Linear(3, 2), {}

    def forward(self, images):
        return self.head(self.backbone(images.flatten(1)))


def _train(run_dir, steps: int, dataset: Indexed) -> Seen:
    loop = LoopConfig(max_steps=steps, seed=0, device="cpu", checkpoint_every=100, log_every=100)
    optimizer = OptimizerConfig(name="sgd", base_lr=0.1, reference_batch=BATCH, schedule="constant")
    plan = plan_training("prefetch", images=ITEMS, batch_per_replica=BATCH, world_size=1, optimizer=optimizer, loop=loop,
                         keys=PlanKeys(batch="batch", warmup="warmup_steps"))  # fmt: skip
    objective = Seen()
    train(Tiny(), objective, dataset, ShuffledBatchSampler(ITEMS, BATCH, seed=3), loop, optimizer, run_dir / "last.pt", plan=plan)
    return objective


def _plain_loader_batches(epochs: int) -> list[list[int]]:
    batches = EpochBatches(ShuffledBatchSampler(ITEMS, BATCH, seed=3))
    loader = epoch_loader(Indexed(), batches, num_workers=0)
    found = []
    for epoch in range(epochs):
        batches.start(epoch)
        found += [batch["index"].tolist() for batch in loader]
    return found


@pytest.mark.parametrize("stopped_at", [3, 4])
def test_the_loop_trains_the_plain_loaders_batches_once_each_across_an_epoch_boundary_and_a_resume(tmp_path, stopped_at):
    expected = _plain_loader_batches(2)[:7]  # 4 batches per epoch: the run crosses into epoch 1
    assert expected[4] != expected[0]  # epoch 1 is shuffled anew
    first, resumed = Indexed(), Indexed()
    seen = _train(tmp_path, stopped_at, first).batches + _train(tmp_path, 7, resumed).batches
    assert seen == expected
    assert first.converted + resumed.converted == expected  # model_input once per batch, nothing converted ahead of the end
    assert sorted(first.read + resumed.read) == sorted(index for batch in expected for index in batch)  # nothing read beyond


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_the_side_stream_stages_the_batches_of_the_synchronous_path():
    device = torch.device("cuda")
    batches = [{key: value.pin_memory() if torch.is_tensor(value) else value for key, value in _batch(first).items()}
               for first in range(0, 64, 2)]  # fmt: skip
    staged = [staged.take() for staged in Prefetcher(device, model_input=lambda images: images * 10 + 1)(iter(batches))]
    for batch, got in zip(batches, staged, strict=True):
        assert got["image"].is_cuda and torch.equal(got["image"].cpu(), batch["image"] * 10 + 1)
