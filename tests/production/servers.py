"""Real servers for the production topology, started and stopped by the tests themselves on loopback ports.

Nothing is skipped: a missing server program fails the session with the command that installs it (`.ci/run`).
The servers themselves are bench/topology.py's, which bench/production.py uses too.
"""
import os
import uuid

import pytest

from bench import topology


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3-compatible server on a free loopback port; yields the environment a pod would get."""
    try:
        with topology.s3_server() as env:
            yield env
    except topology.ServerMissing as err:
        pytest.fail(str(err))


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """This process talks to the loopback S3 server (as a pod would, from its environment) and owns a fresh bucket."""
    for key, value in s3_server.items():
        monkeypatch.setenv(key, value)
    bucket = f"rag-{uuid.uuid4().hex[:12]}"
    topology.create_bucket(s3_server, bucket)
    return {"bucket": bucket, "env": {**os.environ, **s3_server}}


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server of its own (Debian's package) in a temporary folder on a free loopback port; its URL."""
    try:
        with topology.postgres_server() as url:
            yield url
    except topology.ServerMissing as err:
        pytest.fail(str(err))
