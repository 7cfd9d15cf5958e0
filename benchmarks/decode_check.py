"""Cost of the check that every listed image decodes and none leaks (``fdsml.data.decode_check``, ``fdsml.data.leaks``).

    python benchmarks/decode_check.py --images 400 --width 500 --height 375
    python benchmarks/decode_check.py --images 100000 --width 64 --height 48

Times, in one run on ``--images`` random JPEGs (CUB's typical size by default; half training, half test images): the
first check (every file read, hashed, decoded, its pixels hashed), a cached second (none decoded), one after 1 % of the
files changed, each with the search for copies, and that search alone, as images/s and ratios to the first.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from fdsml.data import ImageRecords
from fdsml.data.image_records import decode_image  # noqa: F401  (torchvision's import: the run's cost, not the check's)
from fdsml.data.leaks import check_no_leaks, image_digests, leaked_copies
from timing import parser, seconds


def write_images(folder: Path, count: int, width: int, height: int, seed: int = 0) -> list[Path]:
    """``count`` JPEGs of smooth random colour (photograph-like sizes in bytes, not noise)."""
    rng, paths = np.random.default_rng(seed), [folder / f"{index:06d}.jpg" for index in range(count)]
    for path in paths:
        small = rng.integers(0, 255, (height // 25 + 1, width // 25 + 1, 3), dtype=np.uint8)
        Image.fromarray(small).resize((width, height), Image.BILINEAR).save(path, quality=90)
    return paths


def main() -> None:
    command = parser(__doc__)
    for name, default in (("--images", 400), ("--width", 500), ("--height", 375)):
        command.add_argument(name, type=int, default=default)
    args = command.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        paths = write_images(Path(folder), args.images, args.width, args.height)
        os.chdir(folder)  # the decode check's cache: data/02_intermediate/ under the working folder
        half = len(paths) // 2
        parts = {"train": ImageRecords(labels=np.arange(half), paths=paths[:half]), "test": ImageRecords(labels=np.arange(len(paths) - half), paths=paths[half:])}
        check = lambda: check_no_leaks("benchmark", parts, ("test",))  # noqa: E731
        first, second = seconds(check), seconds(check)
        search = seconds(lambda digests=image_digests(parts, "benchmark"): leaked_copies(digests, ("test",)))
        for path in (changed := paths[::100]):
            Image.open(path).transpose(Image.FLIP_LEFT_RIGHT).save(path, quality=90)
        third = seconds(check)
    print(f"{(count := len(paths))} images of {args.width} x {args.height} px (JPEG)")
    print(f"first check (decode all)       {count / first:9.0f} images/s")
    print(f"second check (cached)          {count / second:9.0f} images/s  ({first / second:.1f}x the first)")
    print(f"after {len(changed)} files changed       {count / third:9.0f} images/s  ({first / third:.1f}x the first)")
    print(f"search for copies alone        {count / search:9.0f} images/s  ({100 * search / second:.1f} % of the second check)")


if __name__ == "__main__":
    main()
