"""Typed, validated configuration: parameters dicts become frozen dataclasses at the boundary.

Every pipeline turns its ``params:<name>`` dict into a dataclass with :func:`parse`, once,
before any work. A wrong key, type or value stops the run with a :class:`ConfigError` naming
the dotted key and what it accepts, so a typo in ``conf/`` never surfaces as a crash deep in
a training loop.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import inspect
import json
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar, Union

from fdsml.errors import UserFixableError
from fdsml.seeds import SEED_LIMIT

T = TypeVar("T")
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # an environment (paper, local) overrides single keys; the rest comes from base
    "merge_strategy": {"parameters": "soft"},
}
"""How the project's configuration loader reads ``conf/`` (``settings.py`` gives it to Kedro; a study reads its env with it)."""


class ConfigError(UserFixableError, ValueError):
    """A parameter is missing, unknown, of the wrong type or out of range."""


def parse(cls: type[T], raw: Any, name: str) -> T:
    """Build dataclass ``cls`` from mapping ``raw``; ``name`` is the dotted key used in errors."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{name}: expected a mapping of parameters, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(f"{name}: {unknown_keys_message(name, unknown, fields)}; accepted keys: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    values = {}
    for key, field in fields.items():
        if key in raw:
            values[key] = _convert(hints[key], raw[key], f"{name}.{key}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{name}.{key}: missing required parameter")
    try:
        return cls(**values)
    except ConfigError as error:
        message = str(error)
        if message.startswith(name):
            raise
        raise ConfigError(f"{name}.{message}") from error
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{name}: {error}") from error


def closest_key(key: str, known: Iterable[str]) -> str | None:
    """The known key a misspelt ``key`` most likely meant (difflib's closest match), or None when none is close."""
    found = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def require_each_key_once(assignments: Iterable[str], option: str = "--params") -> None:
    """Refuse ``key=value`` assignments that set a key twice, or a key and a key below it: the last would win silently."""
    given: dict[str, str] = {}
    for assignment in assignments:
        key = assignment.partition("=")[0].strip()
        for other, first in given.items():
            if other == key:
                raise ConfigError(f"{option}: {key} is given twice ({first} and {assignment.strip()}); give each key once")
            if other.startswith(f"{key}.") or key.startswith(f"{other}."):
                raise ConfigError(f"{option}: {other} and {key} are both given, one inside the other; give each key once")
        given[key] = assignment.strip()


def constructor_keywords(cls: type) -> frozenset[str]:
    """The keyword arguments ``cls(...)`` names: its ``__init__``'s, and its bases' while each takes ``**kwargs`` (as
    pytorch-metric-learning's losses pass theirs on to their mixins)."""
    names: set[str] = set()
    for base in cls.__mro__:
        if base is object or "__init__" not in vars(base):
            continue
        parameters = list(inspect.signature(base.__init__).parameters.values())[1:]
        names |= {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return frozenset(names)


def refuse_unknown_keyword(name: str, accepted: Iterable[str], key: str, owner: str, listed: Iterable[str] | None = None) -> ConfigError:
    """The error for ``key.<name>``, a keyword ``owner`` does not take: the closest of ``accepted``, and ``listed``
    (default: all of them). ``key`` may be relative: :func:`parse` puts the sections above it in front."""
    guess = closest_key(name, accepted)
    meant = f" (did you mean {guess}?)" if guess else ""
    return ConfigError(f"{key}.{name}: {owner} takes no argument {name}{meant}; it takes {', '.join(sorted(accepted) if listed is None else listed)}")


def unknown_keys_message(name: str, unknown: Iterable[str], known: Iterable[str]) -> str:
    """``unknown key(s) a, b`` with, for each that is close to a known key, ``did you mean <name>.<key>?``"""
    unknown, known = list(unknown), list(known)
    guesses = [f"{name}.{guess}" for key in unknown if (guess := closest_key(key, known))]
    message = f"unknown key(s) {', '.join(unknown)}"
    return message + (f" (did you mean {', '.join(guesses)}?)" if guesses else "")


def _convert(hint: Any, value: Any, name: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        errors = []
        for option in options:
            try:
                return _convert(option, value, name)
            except ConfigError as error:
                errors.append(str(error))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{name}: {value!r} matches none of {options}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{name}: {value!r} is not accepted; choose one of {', '.join(map(repr, args))}")
        return value
    if dataclasses.is_dataclass(hint):
        return parse(hint, value, name)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{name}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(f"{name}: expected {len(args)} values, got {len(value)} ({value!r})")
        return tuple(_convert(a, v, f"{name}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name}: expected a mapping, got {value!r}")
        return {k: _convert(args[1], v, f"{name}.{k}") for k, v in value.items()} if args else dict(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected a string, got {value!r}")
        return value
    raise TypeError(f"{name}: unsupported parameter type {hint!r}")


def require_positive(name: str, value: float) -> None:
    """Raise unless ``value`` > 0."""
    if not value > 0:
        raise ConfigError(f"{name}: must be positive, got {value!r}")


def require_non_negative(name: str, value: float) -> None:
    """Raise unless ``value`` >= 0."""
    if not value >= 0:
        raise ConfigError(f"{name}: must be >= 0, got {value!r}")


def require_fraction(name: str, value: float, *, inclusive_zero: bool = True) -> None:
    """Raise unless ``value`` lies in [0, 1] (or (0, 1] when zero is not allowed)."""
    low_ok = value >= 0 if inclusive_zero else value > 0
    if not (low_ok and value <= 1):
        bound = "[0, 1]" if inclusive_zero else "(0, 1]"
        raise ConfigError(f"{name}: must lie in {bound}, got {value!r}")


def require_range(name: str, bounds: tuple[float, float], *, within: tuple[float, float] | None = None) -> None:
    """Raise unless ``bounds`` is a non-empty ``[low, high]`` (optionally inside ``within``)."""
    low, high = bounds
    if not low <= high:
        raise ConfigError(f"{name}: range [{low}, {high}] is empty or inverted; give [low, high] with low <= high")
    if within is not None and not (within[0] <= low and high <= within[1]):
        raise ConfigError(f"{name}: range [{low}, {high}] must lie inside [{within[0]}, {within[1]}]")


def require_seed(name: str, value: int) -> None:
    """Raise unless ``value`` is a seed every consumer accepts (NumPy, torch, the renderer): in [0, 2**63)."""
    if not 0 <= value < SEED_LIMIT:
        raise ConfigError(f"{name}: must lie in [0, 2**63), got {value}")


def digest(definition: Any) -> str:
    """A stable SHA-256 of a JSON-able definition (key order and tuples vs lists do not matter).

    Fingerprints of datasets and runs are built from it: equal digests mean the same artefact.
    """
    text = json.dumps(definition, sort_keys=True, default=list)
    return hashlib.sha256(text.encode()).hexdigest()


def env_parameters(conf_source: str, env: str) -> dict[str, Any]:
    """The parameters ``kedro run --env <env>`` reads under ``conf_source`` (the env overrides single keys of base)."""
    from kedro.config import OmegaConfigLoader

    return OmegaConfigLoader(conf_source, **CONFIG_LOADER_ARGS | {"default_run_env": env})["parameters"]


def with_overlay(base: Mapping[str, Any], overlay: Mapping[str, Any], *, only_existing: bool = False) -> dict[str, Any]:
    """``base`` (nested parameters) with ``overlay`` applied, as a new nested dict; neither input changes.

    Every study, variant and trial is the configuration with a few keys changed, so they all change
    it here, alike. A key of ``overlay`` is a dotted path or a name: ``{"train.seed": 1}`` and
    ``{"train": {"seed": 1}}`` are the same overlay. A mapping merges into the section it lands on;
    any other value (a list too) replaces what was there. A key or section ``base`` lacks is added (a
    ``null`` section counts as an empty one), unless ``only_existing``: then it is a ConfigError naming
    the key, since a misspelt key would otherwise change nothing a run reads. A key through a value
    (``train.seed.x`` where ``train.seed`` is 3) is always a ConfigError.
    """
    result = copy.deepcopy(dict(base))
    _overlay_into(result, overlay, "", only_existing)
    return result


def _overlay_into(node: dict[str, Any], overlay: Mapping[str, Any], prefix: str, only_existing: bool) -> None:
    for key, value in overlay.items():
        dotted = prefix + key
        *parents, leaf = key.split(".")
        target, path = node, prefix
        for name in parents:
            path += name
            target = _section(target, name, path, dotted, only_existing)
            path += "."
        if isinstance(value, Mapping):
            _overlay_into(_section(target, leaf, dotted, dotted, only_existing), value, dotted + ".", only_existing)
        elif only_existing and leaf not in target:
            raise ConfigError(f"{dotted}: not a key of the configuration; a misspelt key would change nothing a run reads")
        else:
            target[leaf] = copy.deepcopy(value)


def _section(node: dict[str, Any], name: str, path: str, key: str, only_existing: bool) -> dict[str, Any]:
    """``node[name]`` (``path`` in the configuration) as a mapping to change: made when missing or null, unless ``only_existing``."""
    current = node.get(name)
    if isinstance(current, dict):
        return current
    if current is not None and not isinstance(current, Mapping):
        raise ConfigError(f"{key}: {path} holds a value ({current!r}), not a section of keys")
    if only_existing and current is None:
        raise ConfigError(f"{key}: {path} is not a section of the configuration; a misspelt key would change nothing a run reads")
    node[name] = dict(current or {})
    return node[name]
