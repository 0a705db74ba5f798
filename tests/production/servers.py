"""Real servers for the production topology, started and stopped by the tests themselves on loopback ports.

Nothing is skipped: a missing server program fails the session with the command that installs it (`.ci/run`).
"""
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

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


def postgres_program(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    if not found[-1]:
        pytest.fail(f"PostgreSQL's {name} is not installed: apt-get install -y postgresql (.ci/run does)")
    return found[-1]


@pytest.fixture(scope="session")
def postgres():
    """A PostgreSQL server of its own (Debian's package) in a temporary folder on a free loopback port; its URL.

    As root, the server runs as the `postgres` user (it refuses to run as root)."""
    initdb, server, pg_ctl = (postgres_program(n) for n in ("initdb", "postgres", "pg_ctl"))
    data = Path(tempfile.mkdtemp(prefix="rag-postgres-"))
    as_user = []
    if os.geteuid() == 0:
        import pwd
        pw = pwd.getpwnam("postgres")
        os.chown(data, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_user, initdb, "-D", str(data / "db"), "-U", "rag", "--auth=trust", "-E", "UTF8"],
                   check=True, capture_output=True)
    port = free_port()
    proc = subprocess.Popen([*as_user, server, "-D", str(data / "db"), "-p", str(port), "-h", "127.0.0.1",
                             "-k", str(data), "-c", "fsync=off", "-c", "max_connections=200"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc, "postgres")
        yield f"postgresql://rag@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "stop", "-D", str(data / "db"), "-m", "fast"], capture_output=True)
        proc.wait(timeout=60)
        shutil.rmtree(data, ignore_errors=True)
