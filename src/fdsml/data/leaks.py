"""Images identical by content where it inflates a score: a test image that is also a training image, or two alike
among the images a model is scored on (a query finds its copy at distance 0). Found before work.

Images are compared by a digest of their decoded pixels (:func:`fdsml.data.decode_check.pixel_digest`; files
through the decode check's cache, so a second check decodes nothing it has seen), so one picture under two
names or in two formats is one picture. Copies within the training images alone are left alone: they weigh an
image twice but leak nothing. A dataset of your own with copies stops the run naming them and the fix; a
standard benchmark whose protocol scores its files as shipped keeps them, and the run says how many.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping

from fdsml.data.decode_check import check_images_decode, pixel_digest
from fdsml.data.layout import DatasetLayoutError
from fdsml.data.retrieval_datasets import ImageRecords

logger = logging.getLogger(__name__)

Image = tuple[str, int]
"""An image by its part's name (``train``, ``test``, ``query``, ``gallery``) and its index there."""


def image_digests(parts: Mapping[str, ImageRecords], title: str) -> dict[str, list[str]]:
    """The pixel digest of every image of every part: the files, all in one decode check (through its cache)."""
    files = [path for records in parts.values() if records.paths is not None for path in records.paths]
    of_files = iter(check_images_decode(files, title))
    return {
        part: [next(of_files) for _ in records.paths] if records.paths is not None else [pixel_digest(image) for image in records.images]
        for part, records in parts.items()
    }


def leaked_copies(digests: Mapping[str, list[str]], scored: Collection[str]) -> list[list[Image]]:
    """The groups of identical images (``digests``: each part's pixel digests) holding at least one image of a
    ``scored`` part: every copy that leaks, in the parts' order."""
    groups: dict[str, list[Image]] = {}
    for part, part_digests in digests.items():
        for index, digest in enumerate(part_digests):
            groups.setdefault(digest, []).append((part, index))
    return [group for group in groups.values() if len(group) > 1 and any(part in scored for part, _ in group)]


def check_no_leaks(title: str, parts: Mapping[str, ImageRecords], scored: Collection[str], *, protocol_keeps: bool = False) -> None:
    """Refuse ``parts`` (a dataset's splits by name; ``title``: its name) when an image of a ``scored`` part has a
    pixel-identical copy among the parts, naming the first copies and the fix; with ``protocol_keeps`` (a benchmark
    scored as shipped), say how many instead. Every listed file is checked to decode on the way."""
    groups = leaked_copies(image_digests(parts, title), scored)
    if not groups:
        return
    copies = sum(len(group) - 1 for group in groups)
    name = _namer(parts)
    shown = "; ".join(" = ".join(name(image) for image in group[:3]) for group in groups[:3])
    found = f"{title}: pixel-identical copies among the scored images or of a training image ({copies}: {shown}{'; ...' if len(groups) > 3 else ''})"
    if protocol_keeps:
        logger.warning("%s; kept: its protocol scores the files as shipped, its published numbers included", found)
        return
    raise DatasetLayoutError(
        f"{found}; a query finds its copy at distance 0 and a test image seen in training scores as learnt: delete "
        "the copies (keep one file of each) or list each picture once, in one split"
    )


def _namer(parts: Mapping[str, ImageRecords]) -> Callable[[Image], str]:
    """How an image is named in a message: ``part path`` (relative to the files' common folder), or ``part image N``."""
    folders = {str(path.parent) for records in parts.values() if records.paths is not None for path in records.paths}
    common = os.path.commonpath(sorted(folders)) if folders else ""

    def name(image: Image) -> str:
        part, index = image
        paths = parts[part].paths
        return f"{part} image {index}" if paths is None else f"{part} {os.path.relpath(paths[index], common)}"

    return name
