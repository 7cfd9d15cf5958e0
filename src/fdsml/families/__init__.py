"""Formula families behind one interface, registered by name (``fractals.family`` selects one).

A new family is one module: a :class:`~fdsml.families.base.Family` subclass, an instance
registered here with :func:`register_family`. Its settings are ``fractals.<name>`` (FineFractalDB,
the default, keeps its settings at the top of ``fractals``, as before families existed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fdsml.config import ConfigError
from fdsml.families.base import GENERIC_COLUMNS, Family, FamilySpec, scale_descriptor
from fdsml.families.finefractaldb import FINEFRACTALDB
from fdsml.families.rcdb import RCDB
from fdsml.families.visual_atom import VISUAL_ATOM

DEFAULT_FAMILY = FINEFRACTALDB.name
_FAMILIES: dict[str, Family] = {}


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
    return tuple(sorted(_FAMILIES))


def get_family(name: str, key: str = "fractals.family") -> Family:
    """The family registered as ``name``; an unknown name raises ``ConfigError`` naming ``key`` and the known families."""
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise ConfigError(f"{key}: unknown formula family {name!r}; known families: {', '.join(known_families())}") from None


def family_spec(params: Mapping[str, Any], key: str = "fractals", reserved: tuple[str, ...] = ("outputs", "holdout")) -> FamilySpec:
    """The family ``params['family']`` selects, with its settings parsed from ``params``.

    The settings are ``params[<family name>]`` when given, otherwise the top-level keys (the
    FineFractalDB layout) less ``family``, ``reserved`` and other families' blocks.
    """
    if not isinstance(params, Mapping):
        raise ConfigError(f"{key}: expected a mapping of parameters, got {type(params).__name__}")
    name = params.get("family", DEFAULT_FAMILY)
    family = get_family(name, f"{key}.family")
    if name in params:
        return FamilySpec(family, family.parse_settings(params[name], f"{key}.{name}"))
    skipped = {"family", *reserved, *_FAMILIES}
    raw = {k: v for k, v in params.items() if k not in skipped}
    return FamilySpec(family, family.parse_settings(raw, key))


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
    if selected in params:  # the top-level keys are FineFractalDB's layout, then read by nobody
        layout = {k: v for k, v in params.items() if k not in {"family", *reserved, *_FAMILIES}}
        _FAMILIES[DEFAULT_FAMILY].parse_settings(layout, key)


register_family(FINEFRACTALDB)
register_family(VISUAL_ATOM)
register_family(RCDB)

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
