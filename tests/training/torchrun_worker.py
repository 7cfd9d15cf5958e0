"""One replica of a pre-training started by ``torchrun`` (``python -m torch.distributed.run``), as a user starts one.

``python -m torch.distributed.run --standalone --nproc_per_node=2 -m tests.training.torchrun_worker OUT OVERRIDES``
pre-trains the tiny table with :func:`tests.training.helpers.tiny_config` and the JSON ``OVERRIDES``
(the run folder ``OUT/run``, shared by the replicas), holding out one class and one instance of each
other class, and saves what this replica ends with in ``OUT/rank<RANK>.pt``. torchrun's
environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) is all it is told.
"""

import json
import os
import sys

import torch


def main(out: str, overrides: str) -> None:
    torch.set_num_threads(1)  # every replica sums on the same number of threads
    from fdsml.data.holdout import HoldoutSettings, split_table
    from fdsml.families.finefractaldb import generate_finefractaldb
    from fdsml.training.pretrain import pretrain

    from tests.support import TINY_FRACTALS, TINY_SPEC
    from .helpers import tiny_config

    table, _ = generate_finefractaldb(TINY_FRACTALS)
    split = split_table(table, HoldoutSettings(instance_fraction=0.2, class_fraction=0.34), seed=0)
    config = tiny_config(f"{out}/run", data={"classes_per_batch": 2}, **json.loads(overrides))
    payload, history = pretrain(table, TINY_SPEC, config, split=split)
    torch.save(
        {"state_dict": payload["state_dict"], "history": history.to_dict("list")}, f"{out}/rank{os.environ['RANK']}.pt"
    )
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
