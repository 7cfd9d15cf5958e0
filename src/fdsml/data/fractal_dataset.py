"""A formula family's table as torch datasets: rendered on the fly through the family, or read from shards.

Both take the codes table (one row per instance: ``class_id``, ``psi``, ``seed`` and the
family's own columns) and return the same item, a dict with ``image`` (the rendering as
rendered, uint8 (1, S, S)), ``label`` (int class id), ``psi`` (float32, the family's descriptor
length) and ``index`` (int row). Workers ship these uint8 images, 1/12 of the bytes of float32
RGB; ``model_input`` (:func:`fractal_input`) turns a batch into what the model sees, on the
device. The table is kept in flat NumPy arrays (:class:`FlatRows`, no per-row Python objects),
so the datasets pickle cheaply into DataLoader workers, and forked workers do not copy a million
small objects on write when they touch their reference counts.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from fdsml.errors import GenerationError
from fdsml.families import FamilySpec
from fdsml.families.generation import DrawnInstance, draw_instance
from fdsml.seeds import generator, stream


def fractal_input(images, img_size: int | None = None, channels: int = 3) -> torch.Tensor:
    """Renderings as a model sees them, the one image pipeline of pre-training and of its analysis.

    uint8 renderings, a NumPy array or a tensor on any device, (S, S) -> float32
    (channels, s, s); (n, S, S) or a loader's batch (n, 1, S, S) -> float32 (n, channels, s, s):
    grey level / 255 in [0, 1], resized to ``img_size`` x ``img_size`` (bilinear, antialiased, so
    thin fractal strokes are averaged rather than skipped; ``None`` or the rendered size:
    unchanged), then replicated over ``channels``. Each image is converted alone, so a batch
    gives, on the CPU, exactly the images converted one by one.
    """
    if not torch.is_tensor(images):
        images = torch.from_numpy(np.asarray(images).astype(np.float32))
    if images.ndim not in (2, 3, 4) or (images.ndim == 4 and images.shape[1] != 1):
        raise ValueError(f"expected (S, S), (n, S, S) or (n, 1, S, S) renderings, got shape {tuple(images.shape)}")
    batch = images.to(torch.float32).div(255.0).reshape(-1, 1, *images.shape[-2:])
    if img_size is not None and tuple(images.shape[-2:]) != (img_size, img_size):
        batch = F.interpolate(batch, size=(img_size, img_size), mode="bilinear", antialias=True, align_corners=False)
    batch = batch.expand(-1, channels, -1, -1).contiguous()
    return batch[0] if images.ndim == 2 else batch


INSTANCE_SOURCES = ("table", "fresh")
"""Where pre-training's instances come from: the table's rows, or drawn anew per (seed, epoch, index)."""


def fresh_noise_seed(seed: int, epoch: int, index: int) -> int:
    """The rendering seed of item ``index`` at ``epoch``: a SeedSequence child of ``seed``, in [0, 2**63)."""
    state = stream(seed, "render_noise", epoch, index).generate_state(1, dtype=np.uint64)[0]
    return int(state >> np.uint64(1))


class _CodesTable:
    """The table columns every item needs, as arrays."""

    def __init__(self, table: pd.DataFrame):
        missing = sorted({"class_id", "psi"} - set(table.columns))
        if missing:
            raise KeyError(f"the fractal codes table lacks column(s) {', '.join(missing)}")
        self.labels = table["class_id"].to_numpy(dtype=np.int64)
        self.psi = np.asarray(table["psi"].tolist(), dtype=np.float32).reshape(len(table), -1)

    def item(self, index: int, image: np.ndarray, psi: np.ndarray | None = None) -> dict:
        """Item ``index`` with its uint8 rendering; ``psi`` overrides the table's descriptor (a fresh instance's)."""
        psi = self.psi[index] if psi is None else np.asarray(psi, dtype=np.float32)
        return {"image": torch.from_numpy(image).unsqueeze(0), "label": int(self.labels[index]), "psi": torch.from_numpy(psi.copy()), "index": index}

    def batch(self, indices: np.ndarray, images: np.ndarray, psi: np.ndarray) -> dict:
        """Items ``indices`` collated, as ``default_collate`` of :meth:`item` gives them: images (n, 1, S, S)."""
        return {
            "image": torch.from_numpy(images),
            "label": torch.from_numpy(self.labels[indices]),
            "psi": torch.from_numpy(psi),
            "index": torch.from_numpy(indices),
        }


class FlatRows:
    """Table columns in flat NumPy arrays: one array per scalar column; per list column, the lists
    concatenated with row offsets. A handful of arrays whatever the number of rows, instead of a
    Python object per row and cell. ``row(i)`` gives row i as a mapping (lists as array views).
    """

    def __init__(self, table: pd.DataFrame, columns):
        self.scalars, self.lists = {}, {}
        for name in columns:
            column = table[name]
            if column.dtype != object:
                self.scalars[name] = column.to_numpy()
                continue
            values = [np.asarray(value, dtype=np.float64).ravel() for value in column]
            offsets = np.concatenate([[0], np.cumsum([len(value) for value in values], dtype=np.int64)]).astype(np.int64)
            self.lists[name] = (np.concatenate(values) if values else np.zeros(0), offsets)

    def row(self, index: int) -> dict:
        row = {name: values[index] for name, values in self.scalars.items()}
        for name, (flat, offsets) in self.lists.items():
            row[name] = flat[offsets[index] : offsets[index + 1]]
        return row


class _TableItems(Dataset):
    """Labels and descriptors from the codes table, shared by both FineFractalDB datasets."""

    _table: _CodesTable

    @property
    def labels(self) -> np.ndarray:
        """Class id of every item (for samplers)."""
        return self._table.labels

    @property
    def psi(self) -> np.ndarray:
        """Descriptor of every item, (n, descriptor length) float32."""
        return self._table.psi

    def model_input(self, images: torch.Tensor) -> torch.Tensor:
        """A batch of items' uint8 images (n, 1, S, S), on any device, as the model sees them (:func:`fractal_input`)."""
        return fractal_input(images, self.img_size, self.channels)

    def _image(self, index: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Item ``index``'s uint8 (S, S) image, and its own descriptor where it is not the table's (else None)."""
        raise NotImplementedError

    def __getitem__(self, index: int) -> dict:
        index = int(index)
        image, psi = self._image(index)
        return self._table.item(index, image, psi)

    def collated_items(self, indices: np.ndarray) -> dict:
        """Items ``indices`` already collated, filled into arrays: one loader worker call per batch, no
        tensor and dict per item (:func:`fdsml.data.epoch_items.collated`)."""
        indices = np.asarray(indices, dtype=np.int64)
        images = np.empty((len(indices), 1, self.size, self.size), dtype=np.uint8)
        psi = self._table.psi[indices]
        for position, index in enumerate(indices.tolist()):
            images[position, 0], own_psi = self._image(index)
            if own_psi is not None:
                psi[position] = own_psi
        return self._table.batch(indices, images, psi)


class FractalCodesDataset(_TableItems):
    """Renders each instance through its family when asked (inside the worker process).

    With ``instances="table"`` item i is the table's instance i. Without ``fresh_noise`` it is
    rendered with the table's ``seed`` (the same image every epoch, the one the fractals pipeline
    checked for occupancy); with ``fresh_noise`` the seed is :func:`fresh_noise_seed` (``seed``,
    epoch, i): new points and patches every epoch, the same for the same triple.

    With ``instances="fresh"`` item i is a NEW instance of row i's class for every (``seed``,
    epoch, i) (:meth:`fresh_instance`): the family's perturbation, validity and occupancy
    rejection, its own rendering seed, and its descriptor as the item's ``psi``.

    Call ``set_epoch`` before iterating; DataLoader workers that persist across epochs learn the
    epoch from their indices (:class:`fdsml.data.epoch_items.EpochItems`).
    """

    def __init__(
        self,
        table: pd.DataFrame,
        spec: FamilySpec,
        *,
        seed: int,
        fresh_noise: bool = False,
        instances: str = "table",
        channels: int = 3,
        img_size: int | None = None,
    ):
        missing = sorted({"seed"} - set(table.columns))
        if missing:
            raise KeyError(f"the fractal codes table lacks column(s) {', '.join(missing)}")
        if channels < 1:
            raise ValueError(f"channels must be positive, got {channels}")
        if instances not in INSTANCE_SOURCES:
            raise ValueError(f"instances must be one of {', '.join(INSTANCE_SOURCES)}, got {instances!r}")
        self._table = _CodesTable(table)
        self.spec = spec
        self.instances = instances
        if instances == "fresh":
            self.class_codes = {int(c): spec.family.class_code(rows, spec.settings) for c, rows in table.groupby("class_id")}
        else:
            own = [name for name in spec.family.table_columns(spec.settings) if name in table.columns and name != "psi"]
            self.rows = FlatRows(table, own)
        self.seeds = table["seed"].to_numpy(dtype=np.int64)
        self.seed = seed
        self.fresh_noise = fresh_noise
        self.channels = channels
        self.img_size = img_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose rendering noise ``fresh_noise`` (or whose fresh instances) items use."""
        self.epoch = epoch

    def rendering_seed(self, index: int) -> int:
        """The seed a table instance ``index`` is rendered with at the current epoch."""
        if self.fresh_noise:
            return fresh_noise_seed(self.seed, self.epoch, index)
        return int(self.seeds[index])

    def fresh_instance(self, index: int) -> DrawnInstance:
        """A new accepted instance of item ``index``'s class, drawn from stream ``fresh_instance`` (seed, epoch, index).

        Rejected draws (validity, occupancy) are redrawn from the same stream, at most the
        family's instance attempts; then :class:`GenerationError` says what to change.
        """
        class_id = int(self.labels[index])
        rng = generator(self.seed, "fresh_instance", self.epoch, index)
        drawn = draw_instance(self.spec, self.class_codes[class_id], rng, Counter())
        if drawn is None:
            raise GenerationError(
                f"fresh instance of item {index} (class {class_id}, epoch {self.epoch}): every one of "
                f"{self.spec.family.max_instance_attempts(self.spec.settings)} draws was rejected; raise the "
                "family's instance attempts, lower fractals.min_occupancy, or set pretrain.data.instances: table"
            )
        return drawn

    def __len__(self) -> int:
        return len(self.seeds)

    @property
    def size(self) -> int:
        return self.spec.size

    def _image(self, index: int) -> tuple[np.ndarray, np.ndarray | None]:
        if self.instances == "fresh":
            drawn = self.fresh_instance(index)
            return drawn.image, self.spec.descriptor(drawn.instance)
        return self.spec.render(self.spec.instance(self.rows.row(index)), self.rendering_seed(index)), None


class ShardedImagesDataset(_TableItems):
    """Reads images materialised by the fractals pipeline, in the codes table's row order.

    ``folder`` holds ``manifest.json`` (``{"shards": [...], "size": S, "count": n}``) and ``.npy``
    uint8 shards of shape (n_i, S, S). Shards are memory-mapped lazily in each process.
    """

    def __init__(self, folder: str | Path, table: pd.DataFrame, *, channels: int = 3, img_size: int | None = None):
        self.folder = Path(folder)
        manifest = json.loads((self.folder / "manifest.json").read_text())
        self.shards = [str(name) for name in manifest["shards"]]
        self.size = int(manifest["size"])
        lengths = []
        for name in self.shards:
            array = np.load(self.folder / name, mmap_mode="r")
            if array.dtype != np.uint8 or array.shape[1:] != (self.size, self.size):
                raise ValueError(f"shard {name}: expected uint8 (n, {self.size}, {self.size}), got {array.dtype} {array.shape}")
            lengths.append(array.shape[0])
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if not int(self.offsets[-1]) == int(manifest["count"]) == len(table):
            raise ValueError(
                f"{self.folder}: shards hold {int(self.offsets[-1])} images, manifest says {manifest['count']}, "
                f"the table has {len(table)} rows"
            )
        if channels < 1:
            raise ValueError(f"channels must be positive, got {channels}")
        self._table = _CodesTable(table)
        self.channels = channels
        self.img_size = img_size
        self._arrays: list[np.ndarray] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Stored images do not change with the epoch; present so both datasets are interchangeable."""

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_arrays"] = None
        return state

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def _image(self, index: int) -> tuple[np.ndarray, None]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} images")
        if self._arrays is None:
            self._arrays = [np.load(self.folder / name, mmap_mode="r") for name in self.shards]
        shard = int(np.searchsorted(self.offsets, index, side="right")) - 1
        return np.array(self._arrays[shard][index - self.offsets[shard]]), None  # out of the read-only memory map
