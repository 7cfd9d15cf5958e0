"""``tune``: an Optuna study over ``pretrain`` (and ``retrieval``) parameters, each trial a real run (docs/tuning.md)."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
