"""Every listed image decodes, checked once per file content: a second check decodes nothing it has seen, a
changed file is decoded again, and a file that does not decode is named."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from fdsml.data.decode_check import check_images_decode, content_digest
from fdsml.data.layout import DatasetLayoutError


@pytest.fixture
def images(tmp_path):
    rng = np.random.default_rng(0)
    paths = [tmp_path / f"{index}.png" for index in range(5)]
    for path in paths:
        Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(path)
    return paths


@pytest.fixture
def decoded(monkeypatch):
    """The paths decoded, in the order asked."""
    from fdsml.data import image_records

    seen = []
    real = image_records.decode_image
    monkeypatch.setattr(image_records, "decode_image", lambda path: seen.append(path) or real(path))
    return seen


def test_a_second_check_decodes_only_the_files_whose_content_changed(images, decoded, tmp_path):
    cache = tmp_path / "cache" / "decoded.txt"
    check_images_decode(images, "set", cache)
    assert sorted(decoded) == sorted(images)
    assert set(cache.read_text().split()) == {content_digest(path) for path in images}
    decoded.clear()
    check_images_decode(images, "set", cache)
    assert decoded == []
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(images[2])  # another picture under the same name
    check_images_decode(images, "set", cache)
    assert decoded == [images[2]]


def test_a_file_that_does_not_decode_is_named_and_never_cached(images, tmp_path):
    cache = tmp_path / "decoded.txt"
    images[3].write_bytes(images[3].read_bytes()[:40])
    with pytest.raises(DatasetLayoutError, match=rf"set: 1 of 5 listed images do not decode; the first: {images[3]}: cannot decode"):
        check_images_decode(images, "set", cache)
    assert content_digest(images[3]) not in cache.read_text().split() and len(cache.read_text().split()) == 4
    with pytest.raises(DatasetLayoutError):
        check_images_decode(images, "set", cache)  # still refused: the cache never vouches for it


def test_the_cache_is_keyed_by_content_not_by_name(images, decoded, tmp_path):
    cache = tmp_path / "decoded.txt"
    check_images_decode(images[:1], "set", cache)
    copy = tmp_path / "elsewhere.png"
    copy.write_bytes(images[0].read_bytes())
    decoded.clear()
    check_images_decode([copy], "set", cache)
    assert decoded == []
