"""Shared test settings: no telemetry, no hub downloads, one torch thread (tiny models, shared cores)."""

import os

import torch

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch.set_num_threads(1)
