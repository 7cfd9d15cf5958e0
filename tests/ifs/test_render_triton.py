import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_triton_kernels_draw_the_numba_renderers_bytes():
    """The Triton renderer under Triton's interpreter, on CPU tensors, against the Numba renderer:
    one and several walkers, both modes, seeds near 2**62 and at 2**63 - 1, codes padded to more
    maps, codes that cannot be framed, a single point (degenerate axes) and the device source's rows."""
    script = Path(__file__).with_name("triton_equality.py")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=900, cwd=script.parent)
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert done.stdout.splitlines()[-1] == "equal"


def test_walkers_must_be_a_power_of_two():
    import numpy as np

    from fdsml.ifs.render_triton import render_batch

    with pytest.raises(ValueError, match="power of two"):
        render_batch([np.eye(2, 6)], [np.ones(2)], [0], size=16, points=10, walkers=3, device="cpu")
