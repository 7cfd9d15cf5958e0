"""The one reuse policy: what may be taken from disk instead of computed again.

Every step that reuses stored work (the codes table, a training run folder, the corrupted test
set) stores :func:`fingerprint` beside it and reuses it only while the fingerprint is unchanged.
The fingerprint covers

* the step's whole resolved configuration, minus the fields declared with :func:`non_defining`
  (where to write, how often to log or checkpoint, how many workers: they cannot change the result)
  and those :func:`defining_when` leaves out (the settings of a plug-in the configuration does not select);
* the content of every input artefact (:func:`content_digest` of the codes table, of the weights a
  run starts from), never a name or a path;
* the code of the module that computes it and of the plug-ins it selects (:mod:`fdsml.plugins`), and
  of every module of their packages or ``fdsml`` they import, directly, lazily (a module named in a
  string) or not (:func:`code_digest`): the syntax tree without docstrings, so a comment, a docstring
  or a blank line keeps the work and any change of code that could change the result redoes it. A
  plug-in no run selects is imported by nobody, so it is in no step's code;
* the world size, where it changes the computation (batches per replica, learning-rate scaling);
* for training runs, the runtime: library versions, resolved device and precision (``runtime``).

No step keeps a list of its own: the non-defining fields are declared once, on the configuration
dataclasses, and a test enumerates every other field.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fdsml.config import digest
from fdsml.integrity import file_digest

PACKAGE = "fdsml"
DEFINES_RESULT = "defines_result"
RESULT_LIBRARIES = ("torch", "timm", "numba", "pytorch-metric-learning")


def non_defining(**field_options: Any) -> Any:
    """A dataclass field that cannot change a step's result (a path, a log interval, a worker count)."""
    return dataclasses.field(metadata={DEFINES_RESULT: False}, **field_options)


def defining_when(defines: Callable[[Any], bool], **field_options: Any) -> Any:
    """A dataclass field that defines a step's result only when ``defines(config)`` holds for the dataclass holding it
    (the settings section of one plug-in among several: only the selected one's)."""
    return dataclasses.field(metadata={DEFINES_RESULT: defines}, **field_options)


def field_defines(field: dataclasses.Field, config: Any) -> bool:
    """Whether ``field`` of dataclass instance ``config`` enters its fingerprint (:func:`non_defining`, :func:`defining_when`)."""
    defines = field.metadata.get(DEFINES_RESULT, True)
    return bool(defines(config)) if callable(defines) else defines


def defining_configuration(config: Any) -> Any:
    """``config`` as plain data, without the fields declared with :func:`non_defining` (or left out by their
    :func:`defining_when`), at any depth."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return {
            field.name: defining_configuration(getattr(config, field.name))
            for field in dataclasses.fields(config)
            if field_defines(field, config)
        }
    if isinstance(config, Mapping):
        return {str(key): defining_configuration(value) for key, value in config.items()}
    if isinstance(config, (list, tuple)):
        return [defining_configuration(value) for value in config]
    return config


def fingerprint(
    config: Any,
    *,
    code: str | tuple[str, ...],
    inputs: Mapping[str, str] | None = None,
    world_size: int | None = None,
    runtime: Mapping[str, Any] | None = None,
) -> str:
    """The fingerprint of a step: its defining configuration, input digests, code, world size and runtime.

    ``code`` is the dotted name of the module that computes the step (or several: the plug-ins it
    selects add theirs, :func:`fdsml.plugins.selected_modules`); ``inputs`` maps each input artefact's role to
    its :func:`content_digest`; ``world_size`` is given by steps whose result depends on it;
    ``runtime`` by training runs (:func:`library_versions`, the resolved device and precision).
    """
    return digest(
        {
            "configuration": defining_configuration(config),
            "inputs": dict(inputs or {}),
            "code": code_digest(*((code,) if isinstance(code, str) else code)),
            "world_size": world_size,
            "runtime": dict(runtime or {}),
        }
    )


def library_versions() -> dict[str, str]:
    """The installed versions of the libraries whose kernels and defaults shape a trained result."""
    return {name: importlib.metadata.version(name) for name in RESULT_LIBRARIES}


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
        return file_digest(artefact)
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
def code_digest(*modules: str) -> str:
    """A SHA-256 of the code of ``modules`` and of every module of their packages (and ``fdsml``) they
    import, transitively.

    Imports inside functions count too, and so does a string naming a module (a lazy import
    hook's table, ``importlib.import_module("...")``). The set is found by reading the sources, so
    a new import needs no list to be kept up to date. Each module enters as its syntax tree
    without docstrings (:func:`_code_tree`): comments, docstrings and layout do not count.
    """
    hasher = hashlib.sha256()
    for name in sorted(code_modules(*modules)):
        hasher.update(name.encode())
        hasher.update(_code_tree(name).encode())
    return hasher.hexdigest()


def code_modules(*modules: str) -> set[str]:
    """``modules``, the packages holding them (imported first) and every module of their packages (and ``fdsml``)
    they import, transitively: what :func:`code_digest` hashes (and a DVC stage depends on, :mod:`fdsml.stage_code`)."""
    packages = frozenset({PACKAGE, *(module.split(".")[0] for module in modules)})
    parents = {".".join(module.split(".")[:end]) for module in modules for end in range(1, module.count(".") + 1)}
    return _imported_closure((*modules, *sorted(parents)), packages)


def _code_tree(module: str) -> str:
    """``module``'s syntax tree as text, without docstrings and positions (so without comments and layout)."""
    tree = _parsed(module)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, include_attributes=False)


def _parsed(module: str) -> ast.Module:
    path = source_path(module)
    return ast.parse(path.read_text(), filename=str(path))


def _imported_closure(modules: tuple[str, ...], packages: frozenset[str]) -> set[str]:
    seen: set[str] = set()
    pending = list(modules)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending.extend(_package_imports(name, packages) - seen)
    return seen


def _package_imports(module: str, packages: frozenset[str]) -> set[str]:
    """The modules of ``packages`` (and their parent packages) that ``module``'s source imports or names."""
    names: set[str] = set()
    for node in ast.walk(_parsed(module)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _imported_from(node, module)
            names.add(source)
            names.update(f"{source}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.split(".")[0] in packages:
            names.add(node.value)
    found = set()
    for name in names:
        parts = name.split(".")
        if parts[0] not in packages or not all(part.isidentifier() for part in parts):
            continue
        for end in range(1, len(parts) + 1):
            candidate = ".".join(parts[:end])
            if is_module(candidate):
                found.add(candidate)
    return found


def _imported_from(node: ast.ImportFrom, module: str) -> str:
    """The absolute name ``module``'s ``from ... import`` reads from: a relative import (a plug-in package's own
    ``from .helpers import ...``) resolved against ``module``'s package."""
    if node.level == 0:
        return node.module
    package = module if source_path(module).name == "__init__.py" else module.rpartition(".")[0]
    return importlib.util.resolve_name("." * node.level + (node.module or ""), package)


@functools.cache
def is_module(name: str) -> bool:
    """Whether ``name`` is an importable module or package."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def source_path(module: str) -> Path:
    """The file of ``module``'s source."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no source for module {module!r}")
    return Path(spec.origin)
