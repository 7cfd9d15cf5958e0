"""Formula families behind one interface, registered by name (``fractals.family`` selects one).

A new family is one module: a :class:`~fdsml.families.base.Family` subclass and an instance it
registers itself with :func:`register_family`, in this folder (found by the registry,
:mod:`fdsml.plugins`) or in your own package, named by an entry point of group ``fdsml.families``
(docs/plugins.md). Its settings are ``fractals.<name>``, its settings' defaults where that block is
absent (FineFractalDB, the default, keeps its settings at the top of ``fractals``, as before families
existed; those keys are FineFractalDB's alone). Nothing imports a family by name: its code enters the
fingerprints of the runs that select it, and of no other (:mod:`fdsml.fingerprints`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fdsml import plugins
from fdsml.config import ConfigError
from fdsml.families.base import GENERIC_COLUMNS, Family, FamilySpec, scale_descriptor

DEFAULT_FAMILY = "finefractaldb"
"""The family of ``fractals``' top-level keys, selected when ``fractals.family`` is absent."""
ENTRY_POINTS = "fdsml.families"
_FAMILIES: dict[str, Family] = {}


def _families() -> dict[str, Family]:
    plugins.discover(__name__, ENTRY_POINTS)
    return _FAMILIES


def register_family(family: Family) -> Family:
    """Make ``family`` selectable by its name; a second family of the same name is refused."""
    if not isinstance(family, Family):
        raise TypeError(f"register_family expects a Family instance, got {type(family).__name__}")
    if family.name in _FAMILIES and _FAMILIES[family.name] is not family:
        raise ValueError(f"a formula family named {family.name!r} is already registered")
    _FAMILIES[family.name] = family
    return family


def unregister_family(name: str) -> None:
    """Forget a family (tests register temporary ones)."""
    _FAMILIES.pop(name, None)


def known_families() -> tuple[str, ...]:
    return tuple(sorted(_families()))


def get_family(name: str, key: str = "fractals.family") -> Family:
    """The family registered as ``name``; an unknown name raises ``ConfigError`` naming ``key`` and the known families."""
    try:
        return _families()[name]
    except (KeyError, TypeError):
        raise ConfigError(f"{key}: unknown formula family {name!r}; known families: {', '.join(known_families())}") from None


def family_spec(params: Mapping[str, Any], key: str = "fractals", reserved: tuple[str, ...] = ("outputs", "holdout")) -> FamilySpec:
    """The family ``params['family']`` selects, with its settings parsed from ``params``.

    The settings are ``params[<family name>]`` when given; otherwise the default family's are the
    top-level keys (the FineFractalDB layout: :func:`_top_level`) and any other family's are its
    settings' defaults, never another family's keys.
    """
    if not isinstance(params, Mapping):
        raise ConfigError(f"{key}: expected a mapping of parameters, got {type(params).__name__}")
    name = params.get("family", DEFAULT_FAMILY)
    family = get_family(name, f"{key}.family")
    if name in params:
        return FamilySpec(family, family.parse_settings(params[name], f"{key}.{name}"))
    if name == DEFAULT_FAMILY:
        return FamilySpec(family, family.parse_settings(_top_level(params, reserved), key))
    return FamilySpec(family, family.parse_settings({}, f"{key}.{name}"))


def _top_level(params: Mapping[str, Any], reserved: tuple[str, ...]) -> dict[str, Any]:
    """The default family's settings in the top-level layout: ``params`` less ``family``, ``reserved`` and families' blocks."""
    skipped = {"family", *reserved, *_families()}
    return {k: v for k, v in params.items() if k not in skipped}


def check_every_block(params: Mapping[str, Any], key: str = "fractals", reserved: tuple[str, ...] = ("outputs", "holdout")) -> None:
    """Parse every family's settings ``params`` holds, the selected family's and the others' alike.

    :func:`family_spec` reads only the selected family's; a misspelt key in another block (or in the
    top-level FineFractalDB layout while another family is selected) would otherwise wait, unread,
    until that family is switched on.
    """
    selected = family_spec(params, key, reserved).family.name
    for name in known_families():
        if name in params and name != selected:
            _FAMILIES[name].parse_settings(params[name], f"{key}.{name}")
    if selected != DEFAULT_FAMILY or selected in params:  # the top-level keys are FineFractalDB's layout, then read by nobody
        _FAMILIES[DEFAULT_FAMILY].parse_settings(_top_level(params, reserved), key)

__all__ = [
    "DEFAULT_FAMILY",
    "GENERIC_COLUMNS",
    "Family",
    "FamilySpec",
    "check_every_block",
    "family_spec",
    "get_family",
    "known_families",
    "register_family",
    "scale_descriptor",
    "unregister_family",
]
