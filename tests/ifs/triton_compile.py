"""Compiles every Triton kernel specialisation the renderer can launch
(:func:`fdsml.ifs.render_triton.specialisations`) for sm_80 and sm_90 with Triton's own compiler,
no GPU needed, and reads the PTX for what byte-equality with the Numba renderer needs: no fused
multiply-add (``fma.rn``) and no flush-to-zero (``.ftz``). Prints one JSON summary; run in a
subprocess by ``test_triton_compile.py`` with an empty ``TRITON_CACHE_DIR`` of its own (a kernel
cached from a lenient compile would be served without the checks)."""

from __future__ import annotations

import json
import os
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fdsml.ifs.render_triton import specialisations

ARCHITECTURES = (80, 90)
FORBIDDEN = {"fma.rn": "fused multiply-add", ".ftz": "flush-to-zero"}


def compiled_ptx(kernel, signature, constexprs, options, architecture) -> str:
    source = ASTSource(kernel, signature, constexprs=constexprs)
    compiled = triton.compile(source, target=GPUTarget("cuda", architecture, 32), options=options)
    if not compiled.asm.get("cubin"):
        raise RuntimeError("no cubin")
    return compiled.asm["ptx"]


def main() -> None:
    summary = {"compiled": 0, "failures": [], "forbidden": [], "cache": os.environ.get("TRITON_CACHE_DIR")}
    for architecture in ARCHITECTURES:
        for kernel, signature, constexprs, options in specialisations():
            name = f"sm_{architecture} {kernel.__name__} {constexprs} num_warps={options['num_warps']}"
            try:
                ptx = compiled_ptx(kernel, signature, constexprs, options, architecture)
            except Exception as error:  # every failing specialisation is reported, not only the first
                summary["failures"].append(f"{name}: {type(error).__name__}: {str(error)[-600:]}")
                continue
            summary["compiled"] += 1
            summary["forbidden"] += [f"{name}: {what} ({token})" for token, what in FORBIDDEN.items() if token in ptx]
    if not summary["failures"]:
        kernel, signature, constexprs, options = specialisations()[0]
        fused = compiled_ptx(kernel, signature, constexprs, {**options, "enable_fp_fusion": True}, 90)
        summary["control_fma_when_fused"] = fused.count("fma.rn")  # the PTX check can see an fma
    print(json.dumps(summary))
    sys.exit(1 if summary["failures"] or summary["forbidden"] else 0)


if __name__ == "__main__":
    main()
