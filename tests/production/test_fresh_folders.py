"""Every writer run in an empty folder, as a new pod would be: the bucket and Postgres are the state of record. A
partition's writer restores its store from the bucket under the lease, publishes, and checkpoints back."""
import json
import shutil

import pytest
from conftest import SAMPLES
from servers import postgres, s3_env, s3_server  # noqa: F401 (fixtures)

from rag.sources.partitions import claim_store, resolve, store
from rag.store.catalog import Catalog
from rag.store.object_store import ObjectStore
from rag.store.publish import IngestSettings, publish_documents

KEY = "corpus/security"


@pytest.fixture
def bucket_env(s3_env, postgres, monkeypatch):
    monkeypatch.setenv("RAG_SNAPSHOT_URI", f"s3://{s3_env['bucket']}/ws")
    monkeypatch.setenv("RAG_WRITER_LOCK_URL", postgres)
    return ObjectStore(f"s3://{s3_env['bucket']}/ws")


def run_partition(ws, corpus, key=KEY):
    """One partition's documents step in `ws`, as a run in a fresh pod does it."""
    s = store(ws, key)
    spec = resolve([str(corpus)], key, ws)
    claim_store(s)
    catalog = Catalog(s.catalog_path)
    try:
        return publish_documents(catalog, IngestSettings(sources=[str(spec.folder)], select=spec.selection,
                                                         collection=key))[0]
    finally:
        catalog.close()


def test_a_second_run_in_an_empty_folder_publishes_from_what_the_bucket_holds(bucket_env, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "corpus", corpus)
    first = run_partition(tmp_path / "pod-1" / "ws", corpus)
    assert first.new
    (corpus / "security" / "extra.md").write_text("---\nid: extra\ntitle: Extra\nacl: [security-team]\n---\n"
                                                  "A new document about certificate pinning.\n")
    second = run_partition(tmp_path / "pod-2" / "ws", corpus)
    assert len(second.new) == 1 and not second.deleted
    pointer = json.loads(bucket_env.get(f"partitions/{store('ws', KEY).folder.name}/snapshots/CURRENT").body)
    assert pointer["seq"] == 2
