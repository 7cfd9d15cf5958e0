"""Kedro project settings: OmegaConf configuration, base + one run environment."""

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

from fdsml.run_lock import RunLockHooks  # noqa: E402

HOOKS = (RunLockHooks(),)
