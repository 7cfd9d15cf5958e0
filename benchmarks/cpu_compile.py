"""Does ``torch.compile`` pay on the CPU? Its compile time against the step time it saves over a run's length.

    python benchmarks/cpu_compile.py --env cpu                 # conf/cpu's step (FDSL, 48 px), in its precision
    python benchmarks/cpu_compile.py --env cpu --amp false     # the same in float32

The step is the training loop's own (benchmarks/pretrain_step.py's :class:`ProjectStep`), once eager and
once with ``train.compile: true`` (the model through ``torch.compile``, inductor's C++ kernels). The compiled
model's first steps pay the compilation, timed from a cold inductor cache (a fresh temporary folder, as a
first run on a machine pays it); then eager and compiled steps alternate, so load on a shared machine hits
both alike, and each is the median of ``--rounds``. Printed: the compile seconds, the eager and compiled
step, their ratio, the step count at which compiling breaks even, and the net seconds over the
environment's planned steps (``pretrain.train.max_steps``).
"""

from __future__ import annotations

import os
import tempfile
import time

import torch

from pretrain_step import median_steps, project_step
from timing import parameters, parser, use_threads

FIRST_STEPS = 3  # compiled steps counted as compilation: the first traces forward and backward; BatchNorm's train-mode guards may add one


def main() -> None:
    command = parser(__doc__, "--threads", threads=1)
    command.add_argument("--env", default="cpu")
    command.add_argument("--amp", default="true", choices=["true", "false"], help="train.amp of both arms")
    command.add_argument("--rounds", type=int, default=8)
    args = command.parse_args()
    use_threads(args.threads)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cold-")
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(args.threads))
    params = parameters(args.env)
    amp = args.amp == "true"
    eager = project_step(params, {}, amp, batches=4)
    compiled = project_step(params, {}, amp, batches=4, compile_model=True)
    started = time.perf_counter()
    for index in range(FIRST_STEPS):
        compiled(index)
    first_steps = time.perf_counter() - started
    medians = median_steps({"eager": eager, "compiled": compiled}, args.rounds)
    eager_s, compiled_s = medians["eager"]["step_s"], medians["compiled"]["step_s"]
    compile_s = first_steps - FIRST_STEPS * compiled_s
    saved = eager_s - compiled_s
    planned = params["pretrain"]["train"]["max_steps"]
    print(f"conf/{args.env}, train.amp {args.amp}, {args.threads} thread(s), median of {args.rounds} interleaved steps")
    print(f"  compile (cold cache, first {FIRST_STEPS} steps less {FIRST_STEPS} compiled steps): {compile_s:.1f} s")
    print(f"  eager step {1e3 * eager_s:.0f} ms, compiled step {1e3 * compiled_s:.0f} ms, compiled / eager {compiled_s / eager_s:.2f}")
    if saved > 0:
        print(f"  breaks even after {compile_s / saved:,.0f} steps")
    else:
        print("  the compiled step is not faster: compiling never pays")
    if planned:
        print(f"  over the planned {planned:,} steps: {planned * saved - compile_s:+,.0f} s net (positive: compiling pays)")
    print(f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
