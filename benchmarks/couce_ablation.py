"""CouCE's ablation on the embedded digits benchmark: which of its modules help the proxy loss?

    python benchmarks/couce_ablation.py --seeds 0 1 2

Fine-tunes the same starting point (scratch by default, or --checkpoint) with the retrieval
recipe of conf/base under five settings (the shape of the method's ablation table): the plain
proxy loss, + ODBA, + MSRCI, + both without L_cov, and the full method; prints mean ± std over
seeds. The same runs can be launched through Kedro, one at a time:
``kedro run --pipelines=retrieval --params='retrieval.couce={msrci: false, decorrelation: false}'``.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from kedro.config import OmegaConfigLoader

from fdsml.losses.couce import CouCESettings
from fdsml.models.starting_points import StartingPoint
from fdsml.training.retrieval import compare_starting_points, comparison_table, parse_retrieval_params

VARIANTS = {
    "baseline": None,
    "+ODBA": CouCESettings(msrci=False, odba=True, decorrelation=False),
    "+MSRCI": CouCESettings(msrci=True, odba=False, decorrelation=False),
    "+MSRCI+ODBA (no L_cov)": CouCESettings(msrci=True, odba=True, decorrelation=False),
    "full CouCE": CouCESettings(),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--checkpoint", default=None, help="start from this pre-trained checkpoint instead of scratch")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results/couce_ablation.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    params = OmegaConfigLoader("conf", base_env="base", default_run_env="base")["parameters"]["retrieval"]
    work = Path(tempfile.mkdtemp(prefix="fdsml-couce-"))
    start = StartingPoint("fdsml" if args.checkpoint else "scratch", args.checkpoint)
    results, seconds = {}, {}
    for name, couce in VARIANTS.items():
        config = parse_retrieval_params(params | {"run_dir": str(work / name.replace(" ", "_"))})
        config = replace(
            config, starts=(start,), seeds=tuple(args.seeds), couce=couce, train=replace(config.train, epochs=args.epochs)
        )
        started = time.perf_counter()
        metrics, _, _ = compare_starting_points(config)
        seconds[name] = time.perf_counter() - started
        results[name] = metrics[start.name]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"metrics": results, "seconds": seconds}, indent=2))
    print(comparison_table(results))
    baseline = seconds["baseline"]
    print("training time relative to the baseline: " + ", ".join(f"{k} {v / baseline:.2f}x" for k, v in seconds.items()))


if __name__ == "__main__":
    main()
