"""A real browser (headless Chromium) looking at kedro-viz's lineage page: its screenshot, and whether it shows a drawn graph."""

import subprocess
from pathlib import Path

import numpy as np
from PIL import Image

from tests.dependencies import require_program
from tests.servers import stop_group

WINDOW = (1400, 900)
# Inside the graph panel at WINDOW size, clear of the sidebar (x < 480), the release banner (top
# right), the guided-tour popup (bottom right) and the minimap (bottom left): (left, top, right, bottom).
GRAPH_BOX = (500, 40, 1000, 640)
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=15000",  # without it the screenshot is taken before the graph is laid out
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)
INSTALL_HINT = "Chromium is not installed: `apt-get install -y chromium` (Debian) enables this browser check"


def lineage_graph_drawn(image: np.ndarray | None) -> tuple[bool, str]:
    """Whether an RGB kedro-viz screenshot shows a drawn graph, with the measurements that decided it.

    No screenshot (``None``) means nothing was drawn: Chromium 156 writes no file for a page that
    failed to load. Otherwise the page must not be blank (many colours), the graph panel must have kedro-viz's dark canvas
    (Chromium's error page and ``about:blank`` are white) and enough of the panel must be drawn on
    (the app shell before layout leaves the panel empty).
    """
    if image is None:
        return False, "Chromium wrote no screenshot: nothing was drawn"
    pixels = image.astype(np.int32)
    packed = pixels[..., 0] << 16 | pixels[..., 1] << 8 | pixels[..., 2]
    colours = len(np.unique(packed))
    left, top, right, bottom = GRAPH_BOX
    values, counts = np.unique(packed[top:bottom, left:right], return_counts=True)
    background = (values[counts.argmax()] >> np.array([16, 8, 0])) & 0xFF
    panel = pixels[top:bottom, left:right].reshape(-1, 3)
    drawn = float((np.abs(panel - background).max(axis=1) > 32).mean())
    verdict = colours > 50 and background.mean() < 64 and drawn > 0.005
    return verdict, f"{colours} colours, panel background {background.tolist()}, {drawn:.4f} of the panel drawn"


def screenshot(url: str, folder: Path) -> np.ndarray | None:
    """The page as RGB pixels, or None when Chromium wrote no screenshot (a page that did not load)."""
    chromium = require_program("chromium", INSTALL_HINT)
    folder.mkdir(parents=True, exist_ok=True)
    picture = folder / "page.png"
    browser = subprocess.Popen(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={folder / 'profile'}", f"--screenshot={picture}", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        browser.wait(timeout=120)
    finally:
        stop_group(browser)
    if not picture.exists():
        return None
    return np.asarray(Image.open(picture).convert("RGB"))
