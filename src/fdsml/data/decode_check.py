"""Every listed image decodes: checked before a run's first node, so a corrupt file is named before a model trains.

Each file is keyed by its content (BLAKE2b of its bytes). The cache file keeps, for each file seen to decode,
its digest and the digest of its decoded pixels (what :mod:`fdsml.data.leaks` compares: one picture saved twice,
under two names or in two formats, has one pixel digest). A second check reads every file but decodes only new
or changed ones; a file whose bytes changed has another digest and is decoded again. Files are read and decoded
on a thread pool (Pillow decodes outside the GIL), with a progress bar on a terminal.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from fdsml.atomic import atomic_path
from fdsml.data.layout import DatasetLayoutError

DECODE_CACHE = Path("data/02_intermediate/decoded_images.txt")
"""The image files seen to decode, one per line: the file's digest and its pixels' (relative to the project: `kedro run`
runs there). A line of the older format (the file's digest alone) is decoded again, once."""


def content_digest(path: Path) -> str:
    """The BLAKE2b digest of the file's bytes: the cache's key."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


def pixel_digest(pixels: np.ndarray) -> str:
    """The BLAKE2b digest of decoded pixels, their shape and type included: equal for the same picture in any file."""
    header = f"{pixels.dtype.str}{pixels.shape}".encode()
    return hashlib.blake2b(header + np.ascontiguousarray(pixels).tobytes(), digest_size=16).hexdigest()


def _read_cache(cache: Path) -> dict[str, str]:
    if not cache.is_file():
        return {}
    return dict(fields for fields in (line.split() for line in cache.read_text().splitlines()) if len(fields) == 2)


def _check_one(path: Path, known: dict[str, str]) -> tuple[str, str | None, str | None]:
    """The file's digest, its pixels' (None when it does not decode), and why it does not decode."""
    from fdsml.data.image_records import decode_image  # torch and torchvision load only when images are checked

    digest = content_digest(path)
    if digest in known:
        return digest, known[digest], None
    try:
        return digest, pixel_digest(decode_image(path)), None
    except DatasetLayoutError as error:
        return digest, None, str(error)


def check_images_decode(paths: Sequence[Path], title: str, cache: Path = DECODE_CACHE) -> list[str]:
    """The pixel digest of each of ``paths``; :class:`DatasetLayoutError` naming those that do not decode
    (``title``: the dataset). Those that do join ``cache`` (written atomically), whatever the outcome."""
    if not paths:
        return []
    known = _read_cache(cache)
    workers = min(32, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        checked = list(
            tqdm(
                pool.map(lambda path: _check_one(path, known), paths),
                total=len(paths),
                desc=f"{title}: checking that every image decodes",
                unit="image",
                disable=None,  # a bar on a terminal, nothing in a log
            )
        )
    good = {digest: pixels for digest, pixels, _ in checked if pixels is not None}
    if not good.items() <= known.items():
        with atomic_path(cache) as temporary:
            temporary.write_text("".join(f"{digest} {pixels}\n" for digest, pixels in sorted((known | good).items())))
    problems = [problem for _, _, problem in checked if problem is not None]
    if problems:
        raise DatasetLayoutError(
            f"{title}: {len(problems)} of {len(paths)} listed images do not decode; the first: {problems[0]}"
        )
    return [pixels for _, pixels, _ in checked]
