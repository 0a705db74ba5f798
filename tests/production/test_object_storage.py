"""The index on an S3-compatible server (moto, on loopback): named by RAG_LANCE_URI, credentials from the
environment, written by an ingest, read back by `rag retrieve` and by `rag serve`, which follows publishes."""
import json
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml
from conftest import REPO, SAMPLES
from servers import s3_env, s3_server  # noqa: F401 (fixtures)
from test_server import start_server

from pipelines.ingest_run import run_ingest
from rag.store.index import SubchunkIndex, SubchunkRow
from rag.store.object_store import ObjectStore
from rag.store.settings import IngestSettings
from rag.store.storage import measure

QUESTION = "How long does the offline cache hold telemetry?"


@pytest.mark.slow
def test_an_ingest_writes_the_index_to_the_bucket_and_retrieve_and_serve_read_it_there(s3_env, tmp_path, monkeypatch):
    uri = f"s3://{s3_env['bucket']}/index"
    monkeypatch.setenv("RAG_LANCE_URI", uri)
    corpus, ws = tmp_path / "corpus", tmp_path / "ws"
    shutil.copytree(SAMPLES / "corpus", corpus)
    run_ingest(IngestSettings(workspace=ws, sources=[corpus], lance_uri=uri))

    assert not (ws / "lancedb").exists()
    index = SubchunkIndex.reader(uri, None)
    assert index.count() > 0
    bucket_bytes = ObjectStore(uri).size()
    stored = measure(ws / "catalog.duckdb", uri, 1)
    assert stored.index_bytes == bucket_bytes > 0

    cli = subprocess.run([sys.executable, "-m", "pipelines.cli", "retrieve", QUESTION, "--workspace", str(ws),
                          "--groups", "support", "--json"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["items"][0]["doc_id"] == "edge-offline-cache"

    (tmp_path / "users.yaml").write_text(yaml.safe_dump({"ann": ["support"]}))
    proc, client = start_server(ws, "--users-file", str(tmp_path / "users.yaml"))
    try:
        ask = lambda q: client.post("/retrieve", json={"question": q, "user": "ann"}).json()  # noqa: E731
        assert ask(QUESTION)["items"][0]["doc_id"] == "edge-offline-cache"
        before = client.get("/healthz").json()
        codes = "Which error code means the gateway cache is full?"
        assert "error-codes-reference" in {i["doc_id"] for i in ask(codes)["items"]}
        (corpus / "operations" / "error-codes.md").unlink()
        run_ingest(IngestSettings(workspace=ws, sources=[corpus], lance_uri=uri))
        assert "error-codes-reference" not in {i["doc_id"] for i in ask(codes)["items"]}  # at once, filtered
        deadline = time.monotonic() + 60  # the new read state is built between requests, then swapped in
        while client.get("/healthz").json()["publish_id"] <= before["publish_id"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.get("/healthz").json()["publish_id"] > before["publish_id"]
        assert "error-codes-reference" not in {i["doc_id"] for i in ask(codes)["items"]}
        assert SubchunkIndex.reader(uri, None).version > index.version
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_delete_naming_many_documents_in_the_bucket_removes_their_rows_and_older_versions_keep_them(s3_env):
    """A long delete predicate is applied fragment by fragment and committed without it (rag.store.lance_folder);
    on object storage as on a local folder."""
    index = SubchunkIndex(f"s3://{s3_env['bucket']}/index")
    docs = [f"doc-{i:04d}-{'x' * 20}" for i in range(300)]
    rows = [SubchunkRow(d, "1", 0, 0, 10, ("g",), "c", 0, 9, 5, f"hash-{d}") for d in docs]
    for part in (rows[:150], rows[150:]):
        index.add(part, np.eye(len(part), 384, dtype=np.float32) + 0.01)
    before = index.version
    live = {(r.doc_id, r.doc_version, r.part, r.member_start, r.member_end, r.acl, r.collection) for r in rows[:100]}
    assert index.remove_stale(live)[0] == 200
    assert index.member_keys() == live and index.count() == 100
    assert SubchunkIndex.reader(index.uri, before).count() == 300
