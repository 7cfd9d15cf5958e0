import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow  # every kernel compiled twice from an empty Triton cache: about 30 seconds (`make test` stays under 15 minutes; CI runs it)
def test_every_triton_kernel_compiles_for_sm80_and_sm90_without_fma_or_ftz(tmp_path):
    """Triton's compiler, not its interpreter, on every launchable specialisation (triton_compile.py):
    the interpreter accepts what a GPU compile refuses (a non-constexpr global), so both are needed."""
    script = Path(__file__).with_name("triton_compile.py")
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("TRITON_INTERPRET", "TRITON_ALLOW_NON_CONSTEXPR_GLOBALS", "TRITON_DEFAULT_FP_FUSION")}
    environment["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")  # empty: nothing compiled leniently before
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=script.parent, env=environment)
    lines = done.stdout.strip().splitlines()
    assert lines, f"exit status {done.returncode}\n{done.stderr[-3000:]}"
    summary = json.loads(lines[-1])
    failures = summary["failures"]
    assert not failures, f"{len(failures)} of {len(failures) + summary['compiled']} failed to compile, the first:\n{failures[0]}"
    assert not summary["forbidden"], "\n".join(summary["forbidden"][:5])
    assert summary["compiled"] > 0 and done.returncode == 0
    assert summary["control_fma_when_fused"] > 0, "the PTX check would not see a fused multiply-add"


def test_the_kernels_integer_arguments_are_compiled_as_launched():
    """Triton turns an integer argument of 1 (``margin: 1``, one point) into a constexpr, another kernel
    than the one compiled above (and ``margin.to(...)`` fails on it): none may be specialised."""
    from fdsml.ifs.render_triton import specialisations

    for kernel, signature, _, _ in specialisations():
        integers = {name for name, kind in signature.items() if kind in ("i32", "i64")}
        assert integers == {parameter.name for parameter in kernel.params if parameter.do_not_specialize}
