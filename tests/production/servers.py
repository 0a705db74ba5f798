"""Real servers for the production topology, started and stopped by the tests themselves on loopback ports.

Nothing is skipped: a missing server program fails the session with the command that installs it (`.ci/run`).
"""
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

S3_ENV_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ALLOW_HTTP")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"{what} exited with status {proc.returncode}"
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s:g} s")


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3-compatible server on a free loopback port; yields the environment a pod would get."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError:
        pytest.fail("the S3 tests need moto's server and boto3: pip install -e '.[dev,production]' (.ci/run does)")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc, "moto server")
        yield {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ALLOW_HTTP": "true"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """This process talks to the loopback S3 server (as a pod would, from its environment) and owns a fresh bucket."""
    import boto3
    for key, value in s3_server.items():
        monkeypatch.setenv(key, value)
    bucket = f"rag-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return {"bucket": bucket, "env": {**os.environ, **s3_server}}
