"""Losses by the name a configuration gives, each computed in float32 (:func:`fdsml.losses.precision.full_precision`).

A registry keeps, per name, a subclass of the library's loss whose ``forward`` runs in float32,
so parameters (proxies), state dict and ``isinstance`` stay the library's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from fdsml.config import ConfigError, constructor_keywords, refuse_unknown_keyword
from fdsml.losses.precision import full_precision


class LossRegistry(dict):
    """Loss classes by name (a dict: ``name in registry``, ``sorted(registry)``); ``kind`` names them in errors."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str, loss_class: type[nn.Module]) -> None:
        """Make ``loss_class`` available as ``name``, as a subclass whose forward runs in float32."""
        self[name] = type(loss_class.__name__, (loss_class,), {"forward": full_precision(loss_class.forward), "__module__": __name__})

    def check_options(self, name: str, options: Mapping[str, Any], key: str, set_by_fdsml: Mapping[str, str] | None = None) -> None:
        """Refuse, before any work, an option of ``key`` (the block's dotted key) that the loss ``name`` does not take
        (its class's own signature) or that fdsml sets itself (``set_by_fdsml``: the option and what sets it)."""
        loss_class = self[name]
        accepted = constructor_keywords(loss_class)
        for option in options:
            if option in (set_by_fdsml or {}):
                raise ConfigError(f"{key}.{option}: fdsml sets it from {set_by_fdsml[option]}; remove it")
            if option not in accepted:
                raise refuse_unknown_keyword(option, accepted - set(set_by_fdsml or {}), key, f"the {self.kind} {name} ({loss_class.__name__})")

    def build(self, name: str, **options: Any) -> nn.Module:
        """The loss registered as ``name``, built with ``options``; ValueError naming the choices for an unknown one."""
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self)}")
        return self[name](**options)
