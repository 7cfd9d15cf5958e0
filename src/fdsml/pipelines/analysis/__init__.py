"""Pictures that explain the embeddings (docs/method.md §5.7): ``kedro run --pipelines=analysis``."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
