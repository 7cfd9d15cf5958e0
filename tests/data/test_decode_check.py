"""Every listed image decodes, checked once per file content: a second check decodes nothing it has seen, a
changed file is decoded again, and a file that does not decode is named."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from fdsml.data.decode_check import check_images_decode, content_digest, pixel_digest
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
    assert {line.split()[0] for line in cache.read_text().splitlines()} == {content_digest(path) for path in images}
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
    assert content_digest(images[3]) not in cache.read_text().split() and len(cache.read_text().splitlines()) == 4
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


def test_the_check_gives_each_file_the_digest_of_its_pixels_the_same_for_one_picture_in_two_formats(images, decoded, tmp_path):
    cache = tmp_path / "decoded.txt"
    again = tmp_path / "again.bmp"
    Image.open(images[1]).save(again)  # other bytes, the same pixels
    digests = check_images_decode([*images, again], "set", cache)
    assert digests[1] == digests[5] == pixel_digest(np.asarray(Image.open(images[1]).convert("RGB")))
    assert len(set(digests[:5])) == 5
    decoded.clear()
    assert check_images_decode([*images, again], "set", cache) == digests and decoded == []  # from the cache, decoding nothing


def test_a_cache_of_the_older_format_is_decoded_again_once(images, decoded, tmp_path):
    cache = tmp_path / "decoded.txt"
    cache.write_text("".join(f"{content_digest(path)}\n" for path in images))  # digests of the files alone
    digests = check_images_decode(images, "set", cache)
    assert sorted(decoded) == sorted(images) and all(len(line.split()) == 2 for line in cache.read_text().splitlines())
    decoded.clear()
    assert check_images_decode(images, "set", cache) == digests and decoded == []
