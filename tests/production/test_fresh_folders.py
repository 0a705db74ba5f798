"""Every writer run in an empty folder, as a new pod would be: the bucket and Postgres are the state of record. A
partition's writer restores its store from the bucket under the lease, publishes, and checkpoints back."""
import json
import shutil

import pytest
from conftest import SAMPLES
from servers import postgres, s3_env, s3_server  # noqa: F401 (fixtures)

from rag.sources.partitions import claim_store, discover, resolve, retire_store, retired_keys, store, vanished
from rag.store import doc_partitions
from rag.store.catalog import Catalog
from rag.store.object_store import ObjectStore
from rag.store.publish import IngestSettings, publish_documents
from rag.store.store_checkpoint import MOVED
from rag.units.linking import LinkTargets

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
    cold = moved(tmp_path / "pod-2" / "ws")
    assert cold["restored_bytes"] > 0 and cold["checkpointed_bytes"] > 0

    # The same pod's folder again: it holds every chunk already, so only the pointer and manifest are read.
    (corpus / "security" / "more.md").write_text("---\nid: more\ntitle: More\nacl: [security-team]\n---\n"
                                                 "Another document, about key escrow.\n")
    assert [d for d, _ in run_partition(tmp_path / "pod-2" / "ws", corpus).new] == ["more"]
    warm = moved(tmp_path / "pod-2" / "ws")
    assert 0 < warm["restored_bytes"] < cold["restored_bytes"] / 10


def moved(ws):
    """What the store's last restore downloaded and its checkpoint uploaded (rag.store.store_checkpoint)."""
    return json.loads((store(ws, KEY).folder / MOVED).read_text())


def test_a_fresh_folder_plans_from_the_buckets_layout_and_stores(bucket_env, tmp_path, monkeypatch):
    """The sensor's code server starts in an empty folder: shard keys made elsewhere resolve after the collection
    grew, and a collection deleted from the source is found vanished."""
    monkeypatch.setenv("RAG_SNAPSHOT_POLL_S", "0")
    src = tmp_path / "src"
    for name in ("coll", "gone"):
        (src / name).mkdir(parents=True)
    for i in range(3):
        (src / "coll" / f"d{i}.md").write_text(f"---\nid: c{i}\nacl: [staff]\n---\nDocument {i} of the collection.\n")
    (src / "gone" / "g.md").write_text("---\nid: g\nacl: [staff]\n---\nA collection that will vanish.\n")
    assert [s.key for s in discover([str(src)], tmp_path / "sensor-1" / "ws", 2)] == \
        ["src/coll~0of2", "src/coll~1of2", "src/gone"]
    run_partition(tmp_path / "pod-1" / "ws", src, "src/gone")
    for i in range(3, 9):
        (src / "coll" / f"d{i}.md").write_text(f"---\nid: c{i}\nacl: [staff]\n---\nDocument {i}.\n")
    shutil.rmtree(src / "gone")
    fresh = tmp_path / "sensor-2" / "ws"
    assert resolve([str(src)], "src/coll~0of2", fresh, 2).selection.shard == (0, 2)
    assert vanished([str(src)], tmp_path / "sensor-3" / "ws", 2) == ["src/gone"]
    retire_store(store(tmp_path / "sensor-3" / "ws", "src/gone"))
    assert retired_keys(tmp_path / "sensor-4" / "ws") == {"src/gone"}


def test_a_link_out_of_a_partition_is_looked_up_in_the_record_not_in_other_snapshots(bucket_env, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "corpus", corpus)
    run_partition(tmp_path / "pod-1" / "ws", corpus)
    fresh = tmp_path / "pod-2" / "ws"
    targets = ["certificate-rotation", "SSH hardening and service port access", "nowhere"]
    found = doc_partitions.link_targets(fresh, "corpus/operations", targets)
    assert found.ids == {"certificate-rotation"} and found.titles == {"SSH hardening and service port access"}
    assert doc_partitions.link_targets(fresh, KEY, targets) == LinkTargets()   # its own documents are not elsewhere
    assert not list(fresh.parent.rglob("*.parquet"))   # no snapshot of another partition was read
    (corpus / "security" / "ssh-hardening.md").unlink()
    run_partition(tmp_path / "pod-3" / "ws", corpus)
    assert doc_partitions.link_targets(fresh, "corpus/operations", targets).titles == set()


def test_the_partitions_holding_an_id_are_read_from_the_buckets_record_in_a_fresh_folder(bucket_env, tmp_path):
    """Which other partitions' indexes may hold an id's vectors, from the bucket alone: those that publish it and,
    after it left them, still those (a document moved between collections is embedded once)."""
    corpus = tmp_path / "corpus"
    shutil.copytree(SAMPLES / "corpus", corpus)
    run_partition(tmp_path / "pod-1" / "ws", corpus)
    security = store("ws", KEY).folder.name
    assert doc_partitions.publishers(tmp_path / "pod-2" / "ws", "corpus/operations", ["ssh-hardening"]) == [security]
    assert doc_partitions.publishers(tmp_path / "pod-2" / "ws", "corpus/operations", ["nowhere"]) == []
    (corpus / "security" / "ssh-hardening.md").unlink()
    run_partition(tmp_path / "pod-3" / "ws", corpus)
    assert bucket_env.keys(f"doc_ids/left/{doc_partitions._hash('ssh-hardening')}/")
    assert doc_partitions.publishers(tmp_path / "pod-4" / "ws", "corpus/operations", ["ssh-hardening"]) == [security]
    assert doc_partitions.publishers(tmp_path / "pod-4" / "ws", KEY, ["ssh-hardening"]) == []   # its own
