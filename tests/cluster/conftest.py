"""Fixtures that start real servers on 127.0.0.1 for the cluster tests and stop them afterwards."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.cluster.servers import LocalPostgres, LocalSlurm, postgres_missing, slurm_missing


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A one-node Slurm (2 CPUs) on localhost; skipped, saying why, where Slurm is not installed."""
    why = slurm_missing()
    if why:
        pytest.skip(why)
    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory):
    """A PostgreSQL server on 127.0.0.1 with an empty database; skipped, saying why, where it is not installed."""
    why = postgres_missing()
    if why:
        pytest.skip(why)
    # in a folder of its own below /tmp: pytest's temporary folders are closed to the postgres user
    root = Path(tempfile.mkdtemp(prefix="rlearn-postgres-"))
    server = LocalPostgres(root)
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
