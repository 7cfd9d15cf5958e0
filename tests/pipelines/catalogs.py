"""The datasets of the fractals and pretrain pipelines in a test folder, as the project's catalog declares them."""

from kedro.io import MemoryDataset
from kedro_datasets.json import JSONDataset
from kedro_datasets.pandas import CSVDataset, ParquetDataset
from kedro_datasets.pillow import ImageDataset

from fdsml.catalog_datasets import ArrayShardsDataset, CheckpointDataset, OptionalDataset


def fractals_datasets(folder, params) -> dict:
    """``params:fractals`` and every dataset the fractals pipeline reads or writes, under ``folder``."""
    return {
        "params:fractals": MemoryDataset(params),
        "fractal_codes": ParquetDataset(filepath=str(folder / "codes.parquet")),
        "fractal_summary": JSONDataset(filepath=str(folder / "summary.json")),
        "fractal_samples": ImageDataset(filepath=str(folder / "samples.png")),
        "fractal_images": ArrayShardsDataset(filepath=str(folder / "images")),
        "fractal_codes_stored": OptionalDataset({"type": "pandas.ParquetDataset", "filepath": str(folder / "codes.parquet")}),
        "fractal_summary_stored": OptionalDataset({"type": "json.JSONDataset", "filepath": str(folder / "summary.json")}),
    }


def pretrain_datasets(folder, fractals, pretrain) -> dict:
    """:func:`fractals_datasets` plus ``params:pretrain`` (run folder under ``folder``), the model and its history."""
    return fractals_datasets(folder, fractals) | {
        "params:pretrain": MemoryDataset(pretrain | {"run_dir": str(folder / "run")}),
        "pretrained_model": CheckpointDataset(filepath=str(folder / "model.pt")),
        "pretrain_history": CSVDataset(filepath=str(folder / "history.csv")),
    }
