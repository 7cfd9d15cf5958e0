"""Shared test settings (no telemetry, no hub downloads, one torch thread: tiny models, shared cores) and fixtures."""

import os

import pytest
import torch

from fdsml.families.finefractaldb import generate_finefractaldb
from tests.support import FINGERPRINT_FRACTALS, TINY_FRACTALS, UNFILTERED_FRACTALS

os.environ.setdefault("KEDRO_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Back to one torch thread after every test, whatever it left (some library calls in the suite raise the
    count): results that depend on the float sums' order, and the next module's fixtures, see one thread."""
    yield
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_table():
    """The training tests' FineFractalDB table (:data:`tests.support.TINY_FRACTALS`), generated once."""
    table, _ = generate_finefractaldb(TINY_FRACTALS)
    return table


@pytest.fixture(scope="session")
def tiny_unfiltered_table():
    """The validation and analysis tests' table (:data:`tests.support.UNFILTERED_FRACTALS`), generated once."""
    table, _ = generate_finefractaldb(UNFILTERED_FRACTALS)
    return table


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """The team's S3 remote server (tests/s3_remote.py): its endpoint and a client, for the module's tests."""
    from tests.s3_remote import s3_server  # boto3 and moto: only the modules that use the remote need them

    with s3_server(tmp_path_factory.mktemp("aws")) as endpoint_and_client:
        yield endpoint_and_client


@pytest.fixture(scope="module")
def fingerprint_table():
    """The fingerprint tests' FineFractalDB table (:data:`tests.support.FINGERPRINT_FRACTALS`), generated once per module."""
    table, _ = generate_finefractaldb(FINGERPRINT_FRACTALS)
    return table
