"""The one reuse policy: what may be taken from disk instead of computed again.

Every step that reuses stored work (the codes table, a training run folder, the corrupted test
set) stores :func:`fingerprint` beside it and reuses it only while the fingerprint is unchanged.
The fingerprint covers

* the step's whole resolved configuration, minus the fields declared with :func:`non_defining`
  (where to write, how often to log or checkpoint, how many workers: they cannot change the result);
* the content of every input artefact (:func:`content_digest` of the codes table, of the weights a
  run starts from), never a name or a path;
* the source code of the module that computes it and of every ``fdsml`` module it imports, directly
  or not (:func:`code_digest`), so any change of code that could change the result redoes the work;
* the world size, where it changes the computation (batches per replica, learning-rate scaling).

No step keeps a list of its own: the non-defining fields are declared once, on the configuration
dataclasses, and a test enumerates every other field.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fdsml.config import digest

PACKAGE = "fdsml"
DEFINES_RESULT = "defines_result"


def non_defining(**field_options: Any) -> Any:
    """A dataclass field that cannot change a step's result (a path, a log interval, a worker count)."""
    return dataclasses.field(metadata={DEFINES_RESULT: False}, **field_options)


def defining_configuration(config: Any) -> Any:
    """``config`` as plain data, without the fields declared with :func:`non_defining`, at any depth."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {
            field.name: defining_configuration(getattr(config, field.name))
            for field in dataclasses.fields(config)
            if field.metadata.get(DEFINES_RESULT, True)
        }
    if isinstance(config, Mapping):
        return {str(key): defining_configuration(value) for key, value in config.items()}
    if isinstance(config, (list, tuple)):
        return [defining_configuration(value) for value in config]
    return config


def fingerprint(
    config: Any,
    *,
    code: str,
    inputs: Mapping[str, str] | None = None,
    world_size: int | None = None,
) -> str:
    """The fingerprint of a step: its defining configuration, input digests, code and world size.

    ``code`` is the dotted name of the module that computes the step; ``inputs`` maps each input
    artefact's role to its :func:`content_digest`; ``world_size`` is given by steps whose result
    depends on it.
    """
    return digest(
        {
            "configuration": defining_configuration(config),
            "inputs": dict(inputs or {}),
            "code": code_digest(code),
            "world_size": world_size,
        }
    )


def content_digest(artefact: Any) -> str:
    """A SHA-256 of an artefact's content: a table, a tensor mapping (weights), an array or a file path."""
    hasher = hashlib.sha256()
    if isinstance(artefact, pd.DataFrame):
        hasher.update(repr([str(name) for name in artefact.columns]).encode())
        hasher.update(_array_bytes(artefact.index.to_numpy()))
        for _, column in artefact.items():
            hasher.update(_array_bytes(column.to_numpy()))
    elif isinstance(artefact, Mapping):
        for key in sorted(artefact):
            hasher.update(str(key).encode())
            hasher.update(content_digest(artefact[key]).encode())
    elif _is_tensor(artefact):
        tensor = artefact.detach().cpu().contiguous()
        hasher.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
        hasher.update(tensor.reshape(-1).view(sys.modules["torch"].uint8).numpy().tobytes())
    elif isinstance(artefact, np.ndarray):
        hasher.update(_array_bytes(artefact))
    elif isinstance(artefact, (str, Path)):
        with open(artefact, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                hasher.update(chunk)
    else:
        raise TypeError(f"no content digest for {type(artefact).__name__}")
    return hasher.hexdigest()


def _is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor, without importing torch where nothing has (generator workers)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _array_bytes(array: np.ndarray) -> bytes:
    """An array's dtype, shape and bytes; object arrays cell by cell, so list cells and the arrays a
    Parquet round trip gives back for them hash alike."""
    array = np.ascontiguousarray(array)
    if array.dtype == object:
        return b"".join(_array_bytes(np.asarray(cell)) for cell in array.reshape(-1))
    return f"{array.dtype.str}{array.shape}".encode() + array.tobytes()


@functools.cache
def code_digest(module: str) -> str:
    """A SHA-256 of the source of ``module`` and of every ``fdsml`` module it imports, transitively.

    Imports inside functions count too. The set is found by reading the sources, so a new import
    needs no list to be kept up to date.
    """
    hasher = hashlib.sha256()
    for name in sorted(_imported_closure(module)):
        hasher.update(name.encode())
        hasher.update(_source_path(name).read_bytes())
    return hasher.hexdigest()


def _imported_closure(module: str) -> set[str]:
    seen: set[str] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(_package_imports(name) - seen)
    return seen


def _package_imports(module: str) -> set[str]:
    """The ``fdsml`` modules (and their parent packages) that ``module``'s source imports."""
    tree = ast.parse(_source_path(module).read_text(), filename=str(_source_path(module)))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    found = set()
    for name in names:
        parts = name.split(".")
        if parts[0] != PACKAGE:
            continue
        for end in range(1, len(parts) + 1):
            candidate = ".".join(parts[:end])
            if _is_module(candidate):
                found.add(candidate)
    return found


@functools.cache
def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _source_path(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no source for module {module!r}")
    return Path(spec.origin)
