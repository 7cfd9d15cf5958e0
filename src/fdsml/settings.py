"""Kedro project settings: OmegaConf configuration, base + one run environment, the project hooks."""

from kedro.config import OmegaConfigLoader

from fdsml.config import CONFIG_LOADER_ARGS  # noqa: F401 (Kedro reads it here)
from fdsml.credentials import mask_log_records

mask_log_records()  # every Kedro process of the project: no log record shows a password

CONFIG_LOADER_CLASS = OmegaConfigLoader

from fdsml.catalog import RankAwareDataCatalog  # noqa: E402

DATA_CATALOG_CLASS = RankAwareDataCatalog

from fdsml.hooks import ChecksBeforeWork, RunSummary, UpstreamInputs  # noqa: E402
from fdsml.run_lock import RunLockHooks  # noqa: E402

# pluggy calls the last registered first: the parameter and folder checks, the input check, then the lock, ...
HOOKS = (RunSummary(), RunLockHooks(), UpstreamInputs(), ChecksBeforeWork())
