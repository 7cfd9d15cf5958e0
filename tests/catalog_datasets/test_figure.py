"""FigureDataset: a drawn figure is one image written whole; a figure without axes is no file, and removes a stale one."""

import pytest
from kedro.io import DatasetError
from matplotlib.figure import Figure

from fdsml.catalog_datasets import FigureDataset


def drawn() -> Figure:
    figure = Figure()
    figure.subplots().plot([0, 1], [1, 0])
    return figure


def test_a_drawn_figure_is_a_png_written_whole_with_its_save_args(tmp_path):
    FigureDataset(str(tmp_path / "small.png"), {"dpi": 20}).save(drawn())
    dataset = FigureDataset(str(tmp_path / "large.png"), {"dpi": 80})
    dataset.save(drawn())
    assert (tmp_path / "large.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and dataset.exists()
    assert (tmp_path / "large.png").stat().st_size > (tmp_path / "small.png").stat().st_size  # dpi reached savefig
    assert sorted(found.name for found in tmp_path.iterdir()) == ["large.png", "small.png"]  # no temporary left


def test_a_figure_without_axes_writes_nothing_and_removes_the_picture_an_earlier_run_left(tmp_path):
    dataset = FigureDataset(str(tmp_path / "study.png"))
    dataset.save(Figure())
    assert list(tmp_path.iterdir()) == [] and not dataset.exists()
    dataset.save(drawn())
    dataset.save(Figure())
    assert list(tmp_path.iterdir()) == []


def test_it_is_write_only(tmp_path):
    with pytest.raises(DatasetError, match="write-only"):
        FigureDataset(str(tmp_path / "study.png")).load()
