"""One writer per store across machines (no shared disk): a Postgres advisory lease on the store's name, on a real
PostgreSQL server started by the test; a killed holder frees it, and a lost lease stops the publish."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import psycopg2
import pytest
from conftest import REPO, SAMPLES
from servers import postgres, s3_env, s3_server  # noqa: F401 (fixtures)

from rag.query.workspace import Workspace, WorkspaceError
from rag.store.catalog import Catalog
from rag.store.object_store import ObjectStore
from rag.store.publish import IngestSettings, publish_documents
from rag.store.snapshot_files import read_pointer
from rag.store.snapshot_pull import pull
from rag.store.writer_lease import LeaseLost
from rag.store.writer_lock import WriterBusy, WriterLock

HOLD = """
import sys, time
from rag.store.writer_lock import WriterLock
WriterLock(sys.argv[1], "pod a").acquire()
print("held", flush=True)
time.sleep(3600)
"""


@pytest.fixture
def pods(s3_env, postgres, tmp_path, monkeypatch):
    """Two machines' private folders for one store, named alike by the bucket, and the lease database."""
    monkeypatch.setenv("RAG_SNAPSHOT_URI", f"s3://{s3_env['bucket']}/ws")
    monkeypatch.setenv("RAG_WRITER_LOCK_URL", postgres)
    return {"a": tmp_path / "pod-a" / "ws", "b": tmp_path / "pod-b" / "ws", "url": postgres,
            "env": {**s3_env["env"], "RAG_SNAPSHOT_URI": f"s3://{s3_env['bucket']}/ws",
                    "RAG_WRITER_LOCK_URL": postgres, "PYTHONPATH": str(REPO)}}


def test_a_writer_on_another_machine_waits_and_gets_the_store_once_the_holder_dies(pods):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(pods["a"])], cwd=REPO, env=pods["env"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with pytest.raises(WriterBusy, match=rf"lease \(rag writer pid {holder.pid} \(pod a\), since 20"):
            WriterLock(pods["b"], "pod b", wait_s=1).acquire()
        assert time.monotonic() - start >= 1
    finally:
        holder.kill()
        holder.wait()
    with WriterLock(pods["b"], "pod b", wait_s=10):  # the server ended the dead holder's session
        pass


def test_a_writer_whose_lease_ended_does_not_publish(pods, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "corpus", corpus)
    catalog = Catalog(pods["a"] / "catalog.duckdb")
    publish_documents(catalog, IngestSettings(sources=[str(corpus)]))
    bucket = ObjectStore(f"{pods['env']['RAG_SNAPSHOT_URI']}")
    before = json.loads(bucket.get("snapshots/CURRENT").body)
    with psycopg2.connect(pods["url"]) as con, con.cursor() as cur:  # an operator, or a network cut
        cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'rag writer%%'")
        assert cur.fetchall()
    (corpus / "operations" / "error-codes.md").unlink()
    with pytest.raises(LeaseLost, match="must not publish"):
        publish_documents(catalog, IngestSettings(sources=[str(corpus)]))
    assert json.loads(bucket.get("snapshots/CURRENT").body) == before
    catalog.close()


PAUSED = """
import sys, time
from rag.store import snapshot_objects
from rag.store.catalog import Catalog
from rag.store.publish import IngestSettings, publish_documents

push = snapshot_objects.push
def paused_push(*args):
    print("publishing", flush=True)   # past the lease check, before its files and its swap: the test stops it here
    time.sleep(1)
    push(*args)
snapshot_objects.push = paused_push
catalog = Catalog(sys.argv[1] + "/catalog.duckdb", entry="pod a")
try:
    publish_documents(catalog, IngestSettings(sources=[sys.argv[2]]))
except Exception as err:
    print(f"{type(err).__name__}: {err}", flush=True)
    sys.exit(1)
finally:
    catalog.close()
print("published", flush=True)
"""


@contextmanager
def paused_while(writer: subprocess.Popen):
    """The writer stopped (SIGSTOP) from when it says it is publishing until the block ends, then woken and waited
    for (its few lines of output stay in its pipe)."""
    try:
        assert writer.stdout.readline().strip() == "publishing"
        os.kill(writer.pid, signal.SIGSTOP)
        yield
        os.kill(writer.pid, signal.SIGCONT)
        writer.wait(timeout=120)
    finally:
        writer.kill()


@pytest.mark.slow
def test_a_paused_writer_loses_its_lease_on_the_server_and_cannot_publish_when_it_wakes(pods, tmp_path, monkeypatch):
    """SIGSTOP is a machine that stops answering: its connection stays open, so only the server's idle-session
    timeout ends the lease. Another pod then publishes; the paused writer, woken, fails in one line."""
    monkeypatch.setenv("RAG_WRITER_LEASE_TIMEOUT_S", "4")
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "corpus", corpus)
    catalog = Catalog(pods["a"] / "catalog.duckdb")
    publish_documents(catalog, IngestSettings(sources=[str(corpus)]))
    catalog.close()
    (corpus / "operations" / "error-codes.md").unlink()
    writer = subprocess.Popen([sys.executable, "-c", PAUSED, str(pods["a"]), str(corpus)], cwd=REPO, text=True,
                              env={**pods["env"], "RAG_WRITER_LEASE_TIMEOUT_S": "4"}, stdout=subprocess.PIPE)
    with paused_while(writer):
        catalog = Catalog(pods["b"] / "catalog.duckdb", entry="pod b", wait_s=60)  # an empty folder: a new pod
        with psycopg2.connect(pods["url"]) as con, con.cursor() as cur:   # the server ended the paused session
            cur.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s", (f"%{writer.pid}%",))
            assert cur.fetchone()[0] == 0 and writer.poll() is None
        changes = publish_documents(catalog, IngestSettings(sources=[str(corpus)]))[0]
        catalog.close()
        assert [d for d, _ in changes.deleted] == ["error-codes-reference"]
        bucket = ObjectStore(pods["env"]["RAG_SNAPSHOT_URI"])
        published = bucket.get("snapshots/CURRENT").body
    out = writer.stdout.read()
    assert writer.returncode == 1 and len(out.strip().splitlines()) == 1, out
    assert out.startswith("PointerMoved: ") and "another writer" in out
    assert bucket.get("snapshots/CURRENT").body == published
    manifest = json.loads(published)["file"]
    tables = json.loads(bucket.get(f"snapshots/{manifest}").body)["tables"]
    assert all(bucket.get(f"snapshots/segments/{f}") for files in tables.values() for f in files)


@pytest.mark.slow
def test_a_writer_paused_before_a_stores_first_publish_cannot_make_it_once_another_pod_holds_the_lease(
        pods, tmp_path, monkeypatch):
    """The lease grant creates the pointer, naming its epoch and no publish: the paused writer, woken, finds it
    moved and stops before writing a file; readers see nothing published until the holder's first publish."""
    monkeypatch.setenv("RAG_WRITER_LEASE_TIMEOUT_S", "4")
    monkeypatch.setenv("RAG_SNAPSHOT_POLL_S", "0")
    corpus, reader = tmp_path / "corpus", tmp_path / "reader-pod" / "ws"
    shutil.copytree(SAMPLES / "corpus", corpus)
    bucket = ObjectStore(pods["env"]["RAG_SNAPSHOT_URI"])
    writer = subprocess.Popen([sys.executable, "-c", PAUSED, str(pods["a"]), str(corpus)], cwd=REPO, text=True,
                              env={**pods["env"], "RAG_WRITER_LEASE_TIMEOUT_S": "4"}, stdout=subprocess.PIPE)
    with paused_while(writer):
        catalog = Catalog(pods["b"] / "catalog.duckdb", entry="pod b", wait_s=60)   # the lease's second grant
    out = writer.stdout.read()
    assert writer.returncode == 1 and len(out.strip().splitlines()) == 1, out
    assert out.startswith("PointerMoved: ") and "another writer took the store" in out
    assert json.loads(bucket.get("snapshots/CURRENT").body) == {"epoch": 2, "seq": 0}
    assert bucket.keys("snapshots/") == [bucket.key("snapshots/CURRENT")]   # no file of its publish is left
    with pytest.raises(WorkspaceError, match="nothing published yet"):
        Workspace(reader)

    changes = publish_documents(catalog, IngestSettings(sources=[str(corpus)]))[0]
    catalog.close()
    pointer = json.loads(bucket.get("snapshots/CURRENT").body)
    assert (pointer["epoch"], pointer["seq"]) == (2, 1) and changes.new
    pull(reader)
    assert read_pointer(reader).file == pointer["file"]
    served = Catalog.snapshot(reader, read_pointer(reader), tmp_path / "state")
    assert {d for d, in served.rows("SELECT doc_id FROM documents WHERE status = 'current'")} == \
        {d for d, _ in changes.new}
    served.close()
