"""Plug-ins: pre-training objectives, formula families and dataset readers, each one module that registers itself.

A registry (:mod:`fdsml.training.pretrain_objectives.recipe`, :mod:`fdsml.families`, the readers'
:mod:`fdsml.data.retrieval_datasets` and :mod:`fdsml.data.classification_datasets`) calls
:func:`discover` before it answers: every module of its package is imported (a module dropped
into the folder is found, no other file edited), then every Python entry point of its group
(``fdsml.objectives``, ``fdsml.families``, ``fdsml.datasets``), so a researcher's own package
registers the same kinds with the same decorators and calls. An entry point names the module
(or an object in it) whose import registers the plug-in.

Nothing imports a plug-in by name, so a plug-in enters the code fingerprint of the runs that
select it only (:mod:`fdsml.fingerprints`): each parsed configuration names the modules of the
plug-ins it selects (``plugin_modules()``, read by :func:`selected_modules`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from typing import Any

from fdsml.errors import UserFixableError

_DISCOVERED: set[tuple[str, str]] = set()


class PluginError(UserFixableError, ImportError):
    """A plug-in module or entry point failed to import; the message names it and the package it comes from."""


def discover(package: str, group: str) -> None:
    """Import every module of ``package`` and every entry point of ``group`` once, in name order (each registers itself)."""
    if (package, group) in _DISCOVERED:
        return
    _DISCOVERED.add((package, group))  # first: a plug-in asking its registry while it is imported finds it discovering
    folder = importlib.import_module(package)
    for module in sorted(info.name for info in pkgutil.iter_modules(folder.__path__)):
        _load(lambda module=module: importlib.import_module(f"{package}.{module}"), f"{package}.{module}", "its module")
    for entry in sorted(importlib.metadata.entry_points(group=group), key=lambda entry: entry.name):
        origin = f"entry point {entry.name} = {entry.value} (group {group}, package {entry.dist.name if entry.dist else '?'})"
        _load(entry.load, origin, "its package")


def rediscover(package: str, group: str) -> None:
    """Discover ``package`` and ``group`` again: the modules and entry points added since (tests add some)."""
    _DISCOVERED.discard((package, group))
    importlib.invalidate_caches()
    discover(package, group)


def _load(load: Any, origin: str, fix: str) -> None:
    """Import one plug-in; whatever stops it (a missing dependency, a name another plug-in has) names the plug-in."""
    try:
        load()
    except Exception as error:
        raise PluginError(f"plug-in {origin} failed to import: {type(error).__name__}: {error}; fix or remove {fix}") from error


def selected_modules(config: Any) -> tuple[str, ...]:
    """The modules of the plug-ins a parsed configuration selects (its ``plugin_modules()``; none without one)."""
    modules = getattr(config, "plugin_modules", None)
    return tuple(modules()) if modules is not None else ()
