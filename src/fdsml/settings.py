"""Kedro project settings: OmegaConf configuration, base + one run environment, the project hooks."""

from kedro.config import OmegaConfigLoader

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    # an environment (paper, local) overrides single keys; the rest comes from base
    "merge_strategy": {"parameters": "soft"},
}

from fdsml.catalog import RankAwareDataCatalog  # noqa: E402

DATA_CATALOG_CLASS = RankAwareDataCatalog

from fdsml.hooks import ChecksBeforeWork, RunSummary, UpstreamInputs  # noqa: E402
from fdsml.run_lock import RunLockHooks  # noqa: E402

# pluggy calls the last registered first: the parameter and folder checks, the input check, then the lock, ...
HOOKS = (RunSummary(), RunLockHooks(), UpstreamInputs(), ChecksBeforeWork())
