"""Loading a script of benchmarks/ as a module, for the tests of its functions."""

import importlib.util
import sys

from tests.support import ROOT

BENCHMARKS = ROOT / "benchmarks"


def load_benchmark(name: str, monkeypatch) -> object:
    """benchmarks/<name>.py as a module, registered in sys.modules for the test only (its dataclasses look their module up);
    benchmarks/ is on the path while it runs, as when the script is run, so it may import its siblings' helpers."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module
