"""The formula-family interface: what a synthetic dataset must provide to be generated, trained on and validated.

A family (FineFractalDB, VisualAtom, RCDB, ...) is a stateless object; everything that varies
lives in its settings dataclass, parsed from ``params:fractals``. The generic code (table
generation, fresh instances in the loader, pre-training, descriptor validation, grids) only calls
the methods below, so a new family is one module registered by name (:mod:`fdsml.families`).

Randomness always comes from the ``np.random.Generator`` handed in (built from a SeedSequence by
the caller) or from an explicit integer seed: a family never touches global random state.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from fdsml import fingerprints
from fdsml.config import ConfigError, parse

GENERIC_COLUMNS = ("class_id", "instance_id", "psi", "seed", "occupancy")
"""Columns every family's table has: the class, the instance, its descriptor, its rendering seed, its occupancy."""


class Family(ABC):
    """One formula family. Subclasses set ``name`` and ``settings_type`` and implement the abstract methods.

    Every registered family passes the same checks (tests/families/test_contract.py, on its settings'
    defaults; the render fuzzer, :meth:`fuzzed`). The settings dataclass must have the fields the generic
    code reads, each with a default (a family runs without a configuration block): ``seed``, ``n_classes``,
    ``instances_per_class``, ``min_occupancy`` (renderings filling less are rejected),
    ``max_class_replacements`` (class codes tried when an instance keeps failing), ``workers``,
    and :meth:`max_instance_attempts` / :meth:`image_size` tell the rest.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    """How reports and model cards name the dataset."""
    settings_type: ClassVar[type]

    # -- configuration ---------------------------------------------------------------------------
    def parse_settings(self, raw: Mapping[str, Any], key: str) -> Any:
        """The settings dataclass from its parameters mapping (``key`` names it in errors)."""
        return parse(self.settings_type, raw, key)

    def fingerprint(self, settings) -> str:
        """The table's reuse fingerprint: the family, its defining settings and its module's code."""
        return fingerprints.fingerprint({"family": self.name, "settings": settings}, code=type(self).__module__)

    @abstractmethod
    def image_size(self, settings) -> int:
        """Side of the square renderings, in pixels."""

    @abstractmethod
    def max_instance_attempts(self, settings) -> int:
        """Draws of one instance (perturbation, validity, occupancy) before its class code is given up."""

    # -- drawing ---------------------------------------------------------------------------------
    @abstractmethod
    def sample_class(self, rng: np.random.Generator, settings, counts: Counter) -> Any:
        """A class code (any picklable value), after the family's own class-level rejections.

        Count those rejections in ``counts`` (they enter the summary); raise
        :class:`GenerationError` naming the parameter to change when the attempts run out.
        """

    @abstractmethod
    def perturb(self, class_code: Any, rng: np.random.Generator, settings) -> Any | None:
        """One instance of the class: its parameters, or None when the validity rules reject this draw."""

    @abstractmethod
    def render(self, instance: Any, settings, seed: int) -> np.ndarray:
        """The instance's ``(S, S)`` uint8 rendering; the same instance and seed give the same bytes."""

    def reference_settings(self, settings):
        """``settings`` with the reference renderer the codes table is built with (its occupancy
        checks and rejections keep their bytes whatever renders the training images); the same
        settings by default."""
        return settings

    def foreground(self, images: np.ndarray, settings) -> np.ndarray:
        """Which pixels are drawn, the shape occupancy and Chamfer distances see (non-zero: a black
        background; a family drawing on another background overrides it)."""
        return images != 0

    def occupancy(self, image: np.ndarray, settings) -> float:
        """Fraction of drawn pixels."""
        return float(np.count_nonzero(self.foreground(image, settings))) / image.size

    @abstractmethod
    def descriptor(self, instance: Any, settings) -> np.ndarray:
        """The instance's fixed-length float descriptor (scaled by the family's documented ranges)."""

    @abstractmethod
    def descriptor_names(self, settings) -> tuple[str, ...]:
        """One name per descriptor entry (its length is the descriptor's length)."""

    # -- sweeps (descriptor validation, analysis pictures) -----------------------------------------
    @abstractmethod
    def sweep_parameters(self, settings) -> tuple[str, ...]:
        """Names of the class parameters the validation sweeps one at a time (their index is the ``position``)."""

    @abstractmethod
    def rescaled(self, class_code: Any, parameter: int, factor: float, settings) -> tuple[Any | None, bool]:
        """The class code with parameter ``parameter`` multiplied by ``factor`` (1.0: the class code itself) as an
        instance, and whether it passes the validity rules; the instance is None when it cannot be rendered at all."""

    @abstractmethod
    def perturbation_range(self, settings) -> tuple[float, float]:
        """The range of the factors an instance's perturbation multiplies a class parameter by."""

    @abstractmethod
    def perturbed_parameter(self, instance: Any) -> int:
        """The index (into :meth:`sweep_parameters`) of the class parameter the instance's perturbation rescaled."""

    @abstractmethod
    def interpolated(self, instance_0: Any, instance_1: Any, alpha: float, settings) -> Any:
        """The instance at ``alpha`` on the straight line from ``instance_0`` (0) to ``instance_1`` (1), parameter by
        parameter; both come from rows of one :meth:`interpolation_groups` value."""

    def interpolation_groups(self, table: pd.DataFrame) -> pd.Series:
        """Per table row, which rows it can be interpolated with (rows of equal value); by default any with any."""
        return pd.Series(0, index=table.index)

    # -- the table -------------------------------------------------------------------------------
    @abstractmethod
    def table_columns(self, settings) -> tuple[str, ...]:
        """Every column of the family's table, in order: :data:`GENERIC_COLUMNS` and its own."""

    @abstractmethod
    def instance_row(self, instance: Any, settings) -> dict:
        """The family's own columns of one instance's table row."""

    @abstractmethod
    def instance(self, row: Mapping) -> Any:
        """The instance a table row stores (inverse of :meth:`instance_row`)."""

    @abstractmethod
    def class_code(self, rows: pd.DataFrame, settings) -> Any:
        """The class code the table rows of one class were drawn from (for fresh instances)."""

    def check_table(self, table: pd.DataFrame, name: str, settings) -> None:
        """Raise ``ConfigError`` naming ``name`` when the table cannot be this family's (columns, descriptor length)."""
        missing = [column for column in self.table_columns(settings) if column not in table.columns]
        fix = "delete the table and run `kedro run --pipelines=fractals`"
        if missing:
            raise ConfigError(f"{name}: missing column(s) {', '.join(missing)} of family {self.name!r}; {fix}")
        if table.empty:
            raise ConfigError(f"{name}: the table has no rows; run `kedro run --pipelines=fractals`")
        length = len(self.descriptor_names(settings))
        lengths = {len(value) for value in table["psi"]}
        if lengths != {length}:
            raise ConfigError(f"{name}: psi has length(s) {sorted(lengths)}, family {self.name!r} has {length}; {fix}")

    def describe(self, settings) -> dict[str, str]:
        """The dataset's definition as ``{what: value}`` rows for model cards and reports."""
        return {
            "classes x instances": f"{settings.n_classes} x {settings.instances_per_class} (seed {settings.seed})",
            "image size": f"{self.image_size(settings)} px",
        }

    def summary(self, table: pd.DataFrame, counts: Counter, settings) -> dict:
        """Family-specific entries of the generation summary (rejection counts by the family's names)."""
        return {}

    # -- the render fuzzer (tests/ifs/render_fuzz.py) --------------------------------------------------
    def fuzzed(self, instance: Any, rng: np.random.Generator, settings) -> tuple[Any, Any]:
        """A drawn instance pushed past the family's documented ranges, and the settings to render it with: what the
        render fuzzer renders by the thousand (it must give a uint8 image, never crash). By default the instance and
        settings as drawn; a family whose renderer can meet wider values stresses them here."""
        return instance, settings


@dataclass(frozen=True)
class FamilySpec:
    """A family with its settings: the one object pre-training, validation and the pictures render through."""

    family: Family
    settings: Any

    @property
    def name(self) -> str:
        return self.family.name

    @property
    def size(self) -> int:
        return self.family.image_size(self.settings)

    def reference(self) -> FamilySpec:
        """This spec with the family's reference renderer (:meth:`Family.reference_settings`)."""
        return FamilySpec(self.family, self.family.reference_settings(self.settings))

    @property
    def descriptor_names(self) -> tuple[str, ...]:
        return self.family.descriptor_names(self.settings)

    def instance(self, row: Mapping) -> Any:
        return self.family.instance(row)

    def render(self, instance: Any, seed: int) -> np.ndarray:
        return self.family.render(instance, self.settings, seed)

    def descriptor(self, instance: Any) -> np.ndarray:
        return self.family.descriptor(instance, self.settings)

    def foreground(self, images: np.ndarray) -> np.ndarray:
        return self.family.foreground(images, self.settings)

    def render_rows(self, table: pd.DataFrame) -> np.ndarray:
        """Table rows rendered with their stored seeds: ``(len(table), S, S)`` uint8."""
        images = np.empty((len(table), self.size, self.size), dtype=np.uint8)
        for out, (_, row) in zip(images, table.iterrows()):
            out[...] = self.render(self.instance(row), int(row["seed"]))
        return images

    def check_table(self, table: pd.DataFrame, name: str = "fractal_codes") -> None:
        self.family.check_table(table, name, self.settings)

    def defining(self) -> dict:
        """What a result built on these renderings depends on (for reuse fingerprints)."""
        return {"family": self.name, "settings": self.settings}


def scale_descriptor(values, ranges) -> np.ndarray:
    """Min-max scale each entry by its documented ``(low, high)`` range, so distances weigh parameters evenly."""
    values = np.asarray(values, dtype=np.float64)
    low, high = np.asarray(ranges, dtype=np.float64).T
    return (values - low) / np.where(high > low, high - low, 1.0)
