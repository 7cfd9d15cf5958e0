"""Random streams by purpose: no two purposes ever draw from the same ``SeedSequence``.

Pre-training's seed and the generator's seed are equal by default (both 0), so every purpose
below runs under the same seed and each ``SeedSequence`` it builds is recorded; two purposes
sharing a key would draw correlated numbers (the explicit sampler's batch b reusing the fresh
instance and rendering noise of row b; the class-balanced sampler's epoch e reusing class e's code).
"""

import dataclasses
from itertools import combinations

import numpy as np
import pytest

from fdsml import seeds
from fdsml.data import ClassBalancedBatchSampler, ExplicitTripletBatchSampler, FractalCodesDataset, ShuffledBatchSampler, fresh_noise_seed
from fdsml.data.holdout import HoldoutSettings, split_table
from fdsml.families import FamilySpec
from fdsml.families.finefractaldb import FINEFRACTALDB
from fdsml.families.generation import generate_table
from tests.support import TINY_FRACTALS

SEED = 0
SPEC = FamilySpec(FINEFRACTALDB, dataclasses.replace(TINY_FRACTALS, seed=SEED, n_classes=4, instances_per_class=6))


@pytest.fixture(scope="module")
def table():
    return generate_table(SPEC)[0]


def _record(monkeypatch, action) -> set:
    """The (entropy, spawn key) of every SeedSequence ``action`` builds."""
    keys = set()
    original = np.random.SeedSequence

    class Recording(original):
        def __init__(self, entropy=None, *, spawn_key=(), **kwargs):
            super().__init__(entropy, spawn_key=spawn_key, **kwargs)
            keys.add((self.entropy, tuple(self.spawn_key)))

    monkeypatch.setattr(np.random, "SeedSequence", Recording)
    action()
    monkeypatch.setattr(np.random, "SeedSequence", original)
    return keys


def _epochs(sampler, count=4):
    for epoch in range(count):
        sampler.set_epoch(epoch)
        list(sampler)


def test_no_two_purposes_share_a_stream(table, monkeypatch):
    labels = table["class_id"].to_numpy()
    fresh = FractalCodesDataset(table, SPEC, seed=SEED, instances="fresh")
    purposes = {
        "class codes and instances": lambda: generate_table(SPEC),
        "held-out split": lambda: split_table(table, HoldoutSettings(instance_fraction=0.2, class_fraction=0.25), SEED),
        "class-balanced batches": lambda: _epochs(ClassBalancedBatchSampler(labels, 2, 3, seed=SEED, batches_per_epoch=4)),
        "explicit batches": lambda: [ExplicitTripletBatchSampler(labels, 2, "same", seed=SEED).batch(b) for b in range(4)],
        "shuffled batches": lambda: _epochs(ShuffledBatchSampler(len(labels), 4, seed=SEED)),
        "rendering noise": lambda: [fresh_noise_seed(SEED, 0, row) for row in range(8)],
        "fresh instances": lambda: [fresh.fresh_instance(row) for row in range(4)],
    }
    recorded = {purpose: _record(monkeypatch, action) for purpose, action in purposes.items()}
    assert all(recorded.values()), [purpose for purpose, keys in recorded.items() if not keys]
    for (first, keys_first), (second, keys_second) in combinations(recorded.items(), 2):
        assert not keys_first & keys_second, f"{first} and {second} share the streams {sorted(keys_first & keys_second)[:3]}"


def test_every_purpose_has_its_own_tag_above_every_class_id():
    tags = list(seeds.STREAMS.values())
    assert len(set(tags)) == len(tags)
    assert min(tags) >= seeds.TAG_BASE
    with pytest.raises(KeyError, match="declare it in fdsml.seeds.STREAMS"):
        seeds.stream(0, "unheard_of")
