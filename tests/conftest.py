"""Shared test settings: no telemetry, no hub downloads, Kedro project root on the path."""

import os

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
