"""A study's search space: ``tune.space`` entries, what Optuna suggests from them, and the overlay on the configuration.

``tune.space`` is a list (an environment's list replaces base's whole, where a mapping would merge
into it). Each entry names a parameter by its dotted ``key`` in the configuration
(``pretrain.optimizer.base_lr``) and gives a range (``{low, high}``, ``log: true`` for a log scale, ``step`` for a grid of a range;
integers when ``low`` and ``high`` are) or a list of ``choices``. Keys that must move together (P and K
at a fixed batch of P x K images) are one joint entry, ``{keys: [a, b], choices: [[a1, b1], [a2, b2]]}``:
one categorical parameter named ``a+b`` whose values are the JSON lists (``"[a1, b1]"``), split into
their keys wherever the configuration is overlaid.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna

from fdsml.config import ConfigError, with_overlay

STAGES = ("pretrain", "retrieval")
"""The configurations a study may search."""
JOINT = "+"
"""Joins the keys of a joint entry into its parameter's name."""


@dataclass(frozen=True)
class SearchParameter:
    """One dimension of the space: a float or int range (linear or log), or categorical choices."""

    key: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """The configuration keys it sets: its own, or each key of a joint entry."""
        return tuple(self.key.split(JOINT))

    @property
    def is_int(self) -> bool:
        return isinstance(self.low, int) and isinstance(self.high, int) and (self.step is None or isinstance(self.step, int))

    @property
    def extremes(self) -> tuple[Any, ...]:
        """The values that bound what may be suggested: checked against the configuration before any trial."""
        return self.choices if self.choices is not None else (self.low, self.high)

    def suggest(self, trial: optuna.Trial) -> Any:
        if self.choices is not None:
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.is_int:
            return trial.suggest_int(self.key, self.low, self.high, step=self.step or 1, log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), step=self.step, log=self.log)

    def grid(self) -> list[Any]:
        """Every value the grid sampler visits: the choices, or the range in ``step``s."""
        if self.choices is not None:
            return list(self.choices)
        count = int(math.floor((self.high - self.low) / self.step + 1e-9)) + 1
        return [self.low + i * self.step for i in range(count)]


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name}: expected a number, got {value!r}")
    return value


def _check_key(key: str, name: str) -> None:
    if key.split(".")[0] not in STAGES or "." not in key or JOINT in key:
        raise ConfigError(f"{name}: a study searches {' or '.join(STAGES)} parameters; name one as pretrain.optimizer.base_lr")


def parse_joint(index: int, raw: Mapping[str, Any]) -> SearchParameter:
    """A joint entry ``{keys: [a, b], choices: [[a1, b1], ...]}``: one categorical parameter ``a+b``."""
    keys = raw["keys"]
    if not isinstance(keys, (list, tuple)) or len(keys) < 2 or not all(isinstance(key, str) for key in keys):
        raise ConfigError(f"tune.space[{index}].keys: a list of two or more dotted keys, got {keys!r}")
    name = f"tune.space.{JOINT.join(keys)}"
    for key in keys:
        _check_key(key, name)
    choices = raw.get("choices")
    if set(raw) != {"keys", "choices"} or not isinstance(choices, (list, tuple)) or not choices:
        raise ConfigError(f"{name}: a joint entry is {{keys: [...], choices: [[...], ...]}} and nothing else, got {dict(raw)!r}")
    wrong = [choice for choice in choices if not isinstance(choice, (list, tuple)) or len(choice) != len(keys)]
    if wrong:
        raise ConfigError(f"{name}: each choice lists one value per key ({len(keys)}), got {wrong[0]!r}")
    return SearchParameter(JOINT.join(keys), choices=tuple(json.dumps(list(choice)) for choice in choices))


def parse_parameter(index: int, raw: Any, *, grid: bool) -> SearchParameter:
    """Entry ``index`` of ``tune.space``; ConfigError naming ``tune.space.<key>`` for a wrong one."""
    if isinstance(raw, Mapping) and "keys" in raw and "key" not in raw:
        return parse_joint(index, raw)
    key = raw.get("key") if isinstance(raw, Mapping) else None
    if not isinstance(key, str):
        raise ConfigError(
            f"tune.space[{index}]: expected {{key: pretrain.x.y, low:, high:}}, {{key:, choices: [...]}} or {{keys: [...], choices: [[...], ...]}}, got {raw!r}"
        )
    name = f"tune.space.{key}"
    raw = {k: v for k, v in raw.items() if k != "key"}
    _check_key(key, name)
    unknown = sorted(set(raw) - {"low", "high", "log", "step", "choices"})
    if unknown:
        raise ConfigError(f"{name}: unknown key(s) {', '.join(unknown)}; accepted: low, high, log, step, choices")
    if "choices" in raw:
        choices = raw["choices"]
        if set(raw) != {"choices"} or not isinstance(choices, (list, tuple)) or not choices:
            raise ConfigError(f"{name}: choices is a non-empty list, given alone, got {raw!r}")
        return SearchParameter(key, choices=tuple(choices))
    if "low" not in raw or "high" not in raw:
        raise ConfigError(f"{name}: give low and high (a range) or choices")
    low, high = _number(raw["low"], f"{name}.low"), _number(raw["high"], f"{name}.high")
    log, step = bool(raw.get("log", False)), raw.get("step")
    if not low < high:
        raise ConfigError(f"{name}: range [{low}, {high}] is empty or inverted; give low < high")
    if log and low <= 0:
        raise ConfigError(f"{name}: a log range must lie above zero, got low {low}; give low > 0 or log: false")
    if step is not None and (log or not _number(step, f"{name}.step") > 0):
        raise ConfigError(f"{name}.step: a positive step on a linear range, got {step!r} (log: {log})")
    if grid and step is None:
        raise ConfigError(f"{name}: the grid sampler visits listed values; give choices or a step")
    return SearchParameter(key, low=low, high=high, log=log, step=step)


def parse_space(space: list[Any], *, grid: bool) -> tuple[SearchParameter, ...]:
    parameters = tuple(parse_parameter(index, raw, grid=grid) for index, raw in enumerate(space))
    keys = [key for parameter in parameters for key in parameter.keys]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ConfigError(f"tune.space.{repeated[0]}: listed more than once")
    return parameters


def overlay(configuration: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """``configuration`` (``{"pretrain": {...}, ...}``) with each dotted key of ``values`` replaced; a copy.

    A key the configuration does not hold raises ConfigError naming ``tune.space.<key>``: the
    study would otherwise tune a parameter no run reads.
    """
    result = dict(configuration)
    for key, value in expanded(values).items():
        try:
            result = with_overlay(result, {key: value}, only_existing=True)
        except ConfigError:
            section = key.split(".")[0]
            raise ConfigError(f"tune.space.{key}: not a parameter of the configuration (conf/base/parameters_{section}.yml)") from None
    return result


def expanded(values: Mapping[str, Any]) -> dict[str, Any]:
    """A trial's values by configuration key: each joint parameter (``a+b``: ``"[a1, b1]"``) split into its keys."""
    result: dict[str, Any] = {}
    for key, value in values.items():
        result.update(zip(key.split(JOINT), json.loads(value)) if JOINT in key else {key: value})
    return result


def joint_value(key: str, values: Mapping[str, Any]) -> Any:
    """``key``'s value in ``values`` (by configuration key), a joint parameter's as its JSON list: the inverse of :func:`expanded`."""
    return json.dumps([values[part] for part in key.split(JOINT)]) if JOINT in key else values[key]


def nested(values: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys as the nested mapping a parameters file holds (the best trial's overlay)."""
    return with_overlay({}, dict(sorted(expanded(values).items())))
