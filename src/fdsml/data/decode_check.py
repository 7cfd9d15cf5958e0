"""Every listed image decodes: checked before a run's first node, so a corrupt file is named before a model trains.

Each file is keyed by its content (BLAKE2b of its bytes). The digests of files seen to decode are kept
in one cache file, so a second check reads every file but decodes only new or changed ones; a file
whose bytes changed has another digest and is decoded again. Files are read and decoded on a thread
pool (Pillow decodes outside the GIL), with a progress bar on a terminal.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from fdsml.atomic import atomic_path
from fdsml.data.layout import DatasetLayoutError

DECODE_CACHE = Path("data/02_intermediate/decoded_images.txt")
"""Digests of the image files seen to decode, one per line (relative to the project: `kedro run` runs there)."""


def content_digest(path: Path) -> str:
    """The BLAKE2b digest of the file's bytes: the cache's key."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.blake2b(digest_size=16)).hexdigest()


def _read_cache(cache: Path) -> set[str]:
    return set(cache.read_text().split()) if cache.is_file() else set()


def _check_one(path: Path, known: set[str]) -> tuple[str, str | None]:
    """The file's digest, and why it does not decode (None when it decodes or is known to)."""
    from fdsml.data.image_records import decode_image  # torch and torchvision load only when images are checked

    digest = content_digest(path)
    if digest in known:
        return digest, None
    try:
        decode_image(path)
    except DatasetLayoutError as error:
        return digest, str(error)
    return digest, None


def check_images_decode(paths: Sequence[Path], title: str, cache: Path = DECODE_CACHE) -> None:
    """Raise :class:`DatasetLayoutError` naming the files of ``paths`` that do not decode (``title``: the dataset).

    The digests of those that do join ``cache`` (written atomically), whatever the outcome.
    """
    if not paths:
        return
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
    good = {digest for digest, problem in checked if problem is None}
    if not good <= known:
        with atomic_path(cache) as temporary:
            temporary.write_text("".join(f"{digest}\n" for digest in sorted(known | good)))
    problems = [problem for _, problem in checked if problem is not None]
    if problems:
        raise DatasetLayoutError(
            f"{title}: {len(problems)} of {len(paths)} listed images do not decode; the first: {problems[0]}"
        )
