"""One writer per store across machines (no shared disk): a Postgres advisory lease on the store's name, on a real
PostgreSQL server started by the test; a killed holder frees it, and a lost lease stops the publish."""
import json
import shutil
import subprocess
import sys
import time

import psycopg2
import pytest
from conftest import REPO, SAMPLES
from servers import postgres, s3_env, s3_server  # noqa: F401 (fixtures)

from rag.store.catalog import Catalog
from rag.store.object_store import ObjectStore
from rag.store.publish import IngestSettings, publish_documents
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
