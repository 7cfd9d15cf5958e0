"""The per-step seed: one formula for the training loop; the triplet miner and CouCE's nuisance draws on streams of their own."""

from itertools import combinations

import torch
from pytorch_metric_learning.losses import ProxyAnchorLoss

from fdsml.losses.couce import CouCEObjective
from fdsml.losses.pa_triplet import mine_batch_triplets
from fdsml.seeds import SEED_LIMIT, step_seed
from fdsml.training.pretrain_objectives.pa_triplet import PATripletObjective


def test_the_step_seed_keeps_the_numbers_runs_were_trained_with():
    assert step_seed(7, 3) == 7 * 1_000_003 + 3
    assert step_seed(7, 3, rank=2) == (7 * 1_000_003 + 3) * 1_009 + 2
    assert step_seed(7, 3, rank=0) != step_seed(7, 3)  # a replica's stream is not the shared one


def test_every_step_seed_is_a_valid_torch_seed_even_for_huge_run_seeds():
    for seed in (0, 2**62, SEED_LIMIT - 1):
        for rank in (None, 0, 7):
            value = step_seed(seed, 10**6, rank)
            assert 0 <= value < SEED_LIMIT
            torch.Generator().manual_seed(value)


def test_the_triplet_miner_subsamples_with_the_step_seed():
    labels = torch.arange(12) // 3
    psi = torch.randn(12, 6, generator=torch.Generator().manual_seed(0))
    drawn = PATripletObjective("same", "batch", max_triplets=4, seed=11).indices(labels, psi, step=5)
    expected = mine_batch_triplets(labels, psi, "same", max_triplets=4, generator=torch.Generator().manual_seed(step_seed(11, 5, None, "triplet_subsample")))
    assert all(torch.equal(a, b) for a, b in zip(drawn, expected))


def test_couce_draws_each_replica_from_its_own_step_seed():
    objective = CouCEObjective(ProxyAnchorLoss(num_classes=4, embedding_size=8), 8, seed=11)
    generator = objective._generator(torch.device("cpu"), 5)
    assert torch.equal(generator.get_state(), torch.Generator().manual_seed(step_seed(11, 5, None, "nuisance")).get_state())  # one process: no rank


def test_no_draw_within_a_step_replays_the_global_generator_the_loop_seeds(monkeypatch):
    """The loop seeds torch's global generator with the step seed (dropout, drop-path); the miner's
    subsample and CouCE's nuisance generators must not start in that same state (the same stream)."""
    labels = torch.arange(12) // 3
    psi = torch.randn(12, 6, generator=torch.Generator().manual_seed(0))
    generators = []
    monkeypatch.setattr("fdsml.training.pretrain_objectives.pa_triplet.mine_batch_triplets", lambda *args, generator, **kwargs: generators.append(generator))
    for rank in (None, 0, 3):
        monkeypatch.setattr("fdsml.training.pretrain_objectives.pa_triplet.replica_rank", lambda: rank)
        monkeypatch.setattr("fdsml.losses.couce.objective.replica_rank", lambda: rank)
        PATripletObjective("same", "batch", max_triplets=4, seed=11).indices(labels, psi, step=5)
        couce = CouCEObjective(ProxyAnchorLoss(num_classes=4, embedding_size=8), 8, seed=11)._generator(torch.device("cpu"), 5)
        states = [torch.Generator().manual_seed(step_seed(11, 5, rank)).get_state(), generators[-1].get_state(), couce.get_state()]
        assert not any(torch.equal(a, b) for a, b in combinations(states, 2)), rank


def test_a_purposes_step_seed_is_the_first_64_bit_word_of_its_seed_sequence():
    """Hand-computed from NumPy's SeedSequence: key (tag, step, 0) in one process, (tag, step, rank + 1) for a replica."""
    import numpy as np

    from fdsml.seeds import STREAMS

    def word(*key):
        return int(np.random.SeedSequence(5, spawn_key=(STREAMS["nuisance"], *key)).generate_state(1, np.uint64)[0]) % SEED_LIMIT

    assert step_seed(5, 3, purpose="nuisance") == word(3, 0)
    assert [step_seed(5, 3, rank, purpose="nuisance") for rank in (0, 1)] == [word(3, 1), word(3, 2)]


def test_a_generator_depends_on_its_seed_purpose_and_key():
    from fdsml.seeds import generator

    draws = {args: tuple(generator(*args).integers(1 << 62, size=2)) for args in [(1, "augmentation", 0, 1), (2, "augmentation", 0, 1), (1, "analysis", 0, 1), (1, "augmentation", 0, 2)]}
    assert len(set(draws.values())) == 4
    assert tuple(generator(1, "augmentation", 0, 1).integers(1 << 62, size=2)) == draws[(1, "augmentation", 0, 1)]


def test_a_single_process_group_is_no_replica(tmp_path):
    import torch.distributed as dist

    from fdsml.seeds import replica_rank

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert replica_rank() is None
    finally:
        dist.destroy_process_group()
