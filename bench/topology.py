"""The production topology on one machine, on real servers on loopback ports: moto's S3 server, Debian's
PostgreSQL (as the `postgres` user when run as root), a Dagster instance on it and the Dagster daemon.

Each piece is a context manager that starts its server and stops it again; tests/production and
bench/production.py share them. A missing server program is a ServerMissing error naming what installs it.
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


class ServerMissing(RuntimeError):
    """A server program the topology needs is not installed."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s:g} s")


@contextmanager
def s3_server():
    """moto's S3-compatible server (writes serialised, as S3's conditional writes are atomic: bench/moto_s3.py);
    yields the environment a pod gets (credentials, endpoint)."""
    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError:
        raise ServerMissing("moto's S3 server and boto3 are not installed: "
                            "pip install -e '.[dev,production]'") from None
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("moto_s3.py")), "127.0.0.1", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc, "moto server")
        yield {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ALLOW_HTTP": "true"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def create_bucket(env: dict, name: str) -> None:
    import boto3
    boto3.client("s3", region_name=env["AWS_REGION"], endpoint_url=env["AWS_ENDPOINT_URL"],
                 aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                 aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket=name)


def _postgres_program(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    if not found[-1]:
        raise ServerMissing(f"PostgreSQL's {name} is not installed: apt-get install -y postgresql (.ci/run does)")
    return found[-1]


@contextmanager
def postgres_server():
    """A PostgreSQL cluster of its own in a temporary folder; yields its URL (user rag, trust on loopback)."""
    initdb, server, pg_ctl = (_postgres_program(n) for n in ("initdb", "postgres", "pg_ctl"))
    data = Path(tempfile.mkdtemp(prefix="rag-postgres-"))
    as_user = []
    if os.geteuid() == 0:  # the server refuses to run as root
        import pwd
        pw = pwd.getpwnam("postgres")
        os.chown(data, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    try:
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
    finally:
        shutil.rmtree(data, ignore_errors=True)


def write_instance(home: Path, postgres_url: str | None, pods: Path | None = None, model_cache: Path | None = None,
                   max_concurrent_runs: int | None = None) -> Path:
    """DAGSTER_HOME with the repository's dagster.yaml (queued run coordinator and its limits), its storage
    in Postgres when a URL is given (what dagster.yaml's production section says), SQLite otherwise. With `pods`,
    each run starts in an empty folder under it (bench/pod_launcher.py), and run monitoring fails a run whose
    process is gone, as Kubernetes' launcher does for a lost pod."""
    config = yaml.safe_load((REPO / "dagster.yaml").read_text())
    if postgres_url:  # SQLAlchemy 2.1 defaults postgresql:// to psycopg 3; dagster-postgres brings psycopg2
        config["storage"] = {"postgres": {"postgres_url": postgres_url.replace("postgresql://",
                                                                               "postgresql+psycopg2://", 1)}}
    # Test instances only: a freed slot is filled within 2 s, not Dagster's default 5 (a scenario's runs wait on it);
    # 1 s doubled the queue's polling (two Postgres sessions and a daemon wake-up a second) for no shorter scenario.
    config["run_coordinator"]["config"]["dequeue_interval_seconds"] = 2
    if max_concurrent_runs:
        config["run_coordinator"]["config"]["max_concurrent_runs"] = max_concurrent_runs
    if pods is not None:
        config["run_launcher"] = {"module": "bench.pod_launcher", "class": "EmptyFolderRunLauncher",
                                  "config": {"root": str(pods), "model_cache": str(model_cache) if model_cache else None}}
        config["run_monitoring"] = {"enabled": True, "poll_interval_seconds": 2}
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    return home


def process_tree(pid: int) -> list[int]:
    """A process and all its descendants, read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo.extend(children.get(tree[-1], []))
    return tree


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def kill_tree(pid: int, sig: signal.Signals) -> list[int]:
    """Signal a process and every descendant at once (SIGKILL: as a lost pod); returns the pids signalled."""
    tree = process_tree(pid)
    signal_all(tree, sig)
    return tree


def build_model_cache(folder: Path, env: dict) -> Path:
    """The embedder's exported graphs in `folder`, built once before any run, as the image's build step does."""
    subprocess.run([sys.executable, "-c", "from rag.models.onnx_export import onnx_path, openvino_ir_paths; "
                    "onnx_path(); openvino_ir_paths()"], cwd=REPO, check=True, capture_output=True,
                   env={**env, "RAG_MODEL_CACHE": str(folder)})
    return folder


@contextmanager
def dagster_daemon(env: dict, log: Path, cwd: Path = REPO):
    """`dagster-daemon run` on the repository's code location (sensors, run queue, launcher); stopping it stops
    every process it started: its code server and the runs that one launched."""
    with open(log, "w") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w",
                                 str(REPO / "workspace.yaml")], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            # The code server it starts moves to a session of its own and outlives the daemon while a run it
            # launched still runs: stop the whole tree, found before the daemon goes.
            tree = kill_tree(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
            signal_all(tree, signal.SIGKILL)
            proc.wait()
