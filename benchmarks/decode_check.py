"""Cost of the check that every listed image decodes (``fdsml.data.decode_check``), first and second time.

    python benchmarks/decode_check.py --images 400 --width 500 --height 375

Writes ``--images`` random JPEG photographs of CUB's typical size into a temporary folder, then times, in one
run on the same files: the first check (every file read, hashed and decoded), a second check (every file read
and hashed, none decoded: the cache knows them all) and a check after 1 % of the files changed. Prints each
as images/s and the second's speed-up over the first.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from fdsml.data.decode_check import check_images_decode
from timing import parser, seconds


def write_images(folder: Path, count: int, width: int, height: int, seed: int = 0) -> list[Path]:
    """``count`` JPEGs of smooth random colour (photograph-like sizes in bytes, not noise)."""
    rng = np.random.default_rng(seed)
    paths = []
    for index in range(count):
        small = rng.integers(0, 255, (height // 25 + 1, width // 25 + 1, 3), dtype=np.uint8)
        image = Image.fromarray(small).resize((width, height), Image.BILINEAR)
        paths.append(folder / f"{index:06d}.jpg")
        image.save(paths[-1], quality=90)
    return paths


def main() -> None:
    command = parser(__doc__)
    command.add_argument("--images", type=int, default=400)
    command.add_argument("--width", type=int, default=500)
    command.add_argument("--height", type=int, default=375)
    args = command.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        paths = write_images(Path(folder), args.images, args.width, args.height)
        cache = Path(folder) / "decoded_images.txt"
        check = lambda: check_images_decode(paths, "benchmark", cache)  # noqa: E731
        first, second = seconds(check), seconds(check)
        changed = paths[:: 100]
        for path in changed:
            Image.open(path).transpose(Image.FLIP_LEFT_RIGHT).save(path, quality=90)
        third = seconds(check)
    count = len(paths)
    print(f"{count} images of {args.width} x {args.height} px (JPEG)")
    print(f"first check (decode all)       {count / first:9.0f} images/s")
    print(f"second check (cached)          {count / second:9.0f} images/s  ({first / second:.1f}x the first)")
    print(f"after {len(changed)} files changed       {count / third:9.0f} images/s  ({first / third:.1f}x the first)")


if __name__ == "__main__":
    main()
