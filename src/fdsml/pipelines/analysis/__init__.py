"""Pictures that explain the embeddings (METHOD.md section 5): ``kedro run --pipelines=analysis``."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
