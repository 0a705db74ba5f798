"""Published snapshots in object storage (moto's S3 server on loopback): the pointer is swapped with a conditional
write, a second writer cannot overwrite it, a reader on another machine (an empty folder) follows publishes, and a
writer on a new machine continues the store from the bucket."""
import json
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, SAMPLES
from servers import s3_env, s3_server  # noqa: F401 (fixtures)

from rag.models.tokens import default_counter
from rag.query.workspace import Workspace, shared_ids
from rag.retrieval.callers import Caller
from rag.sources.partitions import claim_store, resolve, store
from rag.store.catalog import Catalog
from rag.store.doc_partitions import RECORD_DIR
from rag.store.index import SubchunkIndex
from rag.store.object_store import ObjectStore
from rag.store.publish import IngestSettings, publish_documents, publish_index, publish_units

SUPPORT = Caller(frozenset({"support"}))
CODES = "Which error code means the gateway cache is full?"


def publish(ws, corpus, lance_uri, embedder):
    catalog = Catalog(ws / "catalog.duckdb")
    settings = IngestSettings(sources=[str(corpus)])
    publish_documents(catalog, settings)
    publish_units(catalog, default_counter(), settings)
    publish_index(catalog, SubchunkIndex(lance_uri), embedder.encode, default_counter(), settings)
    catalog.close()


SWAP = ("import sys; from rag.store.object_store import ObjectStore; "
        "print(ObjectStore(sys.argv[1]).swap('CURRENT', sys.argv[3].encode(), sys.argv[2]) is not None)")


def test_of_writers_swapping_from_the_same_version_exactly_one_wins(s3_env):
    store = ObjectStore(f"s3://{s3_env['bucket']}/race")
    first = store.create("CURRENT", b"0")
    assert first and store.create("CURRENT", b"x") is None and store.get("CURRENT").body == b"0"
    procs = [subprocess.Popen([sys.executable, "-c", SWAP, store.uri, first, str(i)], cwd=REPO, text=True,
                              stdout=subprocess.PIPE, env={**s3_env["env"], "PYTHONPATH": str(REPO)})
             for i in range(1, 7)]
    won = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert sorted(won) == ["False"] * 5 + ["True"]
    assert store.get("CURRENT").body in {str(i).encode() for i in range(1, 7)}


@pytest.mark.slow
def test_a_reader_with_no_shared_disk_follows_publishes_and_a_new_writer_pod_continues_the_store(
        s3_env, tmp_path, monkeypatch, embedder):
    bucket = s3_env["bucket"]
    monkeypatch.setenv("RAG_SNAPSHOT_URI", f"s3://{bucket}/ws")
    monkeypatch.setenv("RAG_SNAPSHOT_POLL_S", "0")
    lance = f"s3://{bucket}/index"
    corpus, writer_ws, reader_ws = tmp_path / "corpus", tmp_path / "writer-pod" / "ws", tmp_path / "reader-pod" / "ws"
    shutil.copytree(SAMPLES / "corpus", corpus)
    publish(writer_ws, corpus, lance, embedder)
    objects = ObjectStore(f"s3://{bucket}/ws")
    pointer = json.loads(objects.get("snapshots/CURRENT").body)
    assert objects.get(f"snapshots/{pointer['file']}") is not None

    reader = Workspace(reader_ws, lance_uri=lance, embedder=embedder)
    ids = lambda: {i.doc_id for i in reader.retrieve("longrag", SUPPORT, CODES, 1500).items}  # noqa: E731
    assert "error-codes-reference" in ids()
    assert reader.snapshot().info.seq == pointer["seq"]

    (corpus / "operations" / "error-codes.md").unlink()
    publish(writer_ws, corpus, lance, embedder)
    assert "error-codes-reference" not in ids()
    newest = json.loads(objects.get("snapshots/CURRENT").body)
    assert reader.snapshot().info.seq == newest["seq"] > pointer["seq"]
    local = {p.name for p in (reader_ws / "snapshots" / "segments").iterdir()}
    assert local == {k.rsplit("/", 1)[1] for k in objects.keys("snapshots/segments/")}

    # The writer died after swapping the bucket's pointer and before its own: the next publish finishes it.
    local_pointer = writer_ws / "snapshots" / "CURRENT"
    local_pointer.write_text(json.dumps(pointer))
    (corpus / "operations" / "time-sync.md").unlink()
    publish(writer_ws, corpus, lance, embedder)
    after_crash = json.loads(objects.get("snapshots/CURRENT").body)
    assert after_crash["seq"] > newest["seq"] and after_crash == json.loads(local_pointer.read_text())
    assert "time-sync-ntp" not in {i.doc_id for i in reader.retrieve("longrag", SUPPORT, "How is time synchronised?",
                                                                    1500).items}
    newest = after_crash

    # A writer pod with an empty folder continues the store from the bucket (its catalog checkpoint and snapshot).
    (corpus / "operations" / "health-monitoring.md").unlink()
    publish(tmp_path / "new-pod" / "ws", corpus, lance, embedder)
    assert json.loads(objects.get("snapshots/CURRENT").body)["seq"] > newest["seq"]
    assert "health-monitoring" not in {i.doc_id for i in reader.retrieve(
        "longrag", SUPPORT, "How is gateway health monitored?", 1500).items}


def test_partitions_on_pods_with_no_shared_disk_find_an_id_they_both_publish_through_the_bucket(
        s3_env, tmp_path, monkeypatch):
    """The id record lives in the bucket: each writer pod sees only its own folder, a reader pod an empty one."""
    monkeypatch.setenv("RAG_SNAPSHOT_URI", f"s3://{s3_env['bucket']}/ws")
    src = tmp_path / "docs"
    for folder, text in (("hr", "The pay band for grade 7 is 91,000 euros."), ("public", "Pay bands change yearly.")):
        (src / folder).mkdir(parents=True)
        (src / folder / "bands.md").write_text(f"---\nid: pay-bands\nacl: [staff]\n---\n{text}\n")
    for pod, key in (("pod-a", "docs/hr"), ("pod-b", "docs/public")):
        ws = tmp_path / pod / "ws"
        s = store(ws, key)
        claim_store(s)
        catalog = Catalog(s.catalog_path)
        publish_documents(catalog, IngestSettings(sources=[str(src)]).for_partition(resolve([str(src)], key, ws)))
        catalog.close()
    assert not (tmp_path / "pod-a" / "ws" / RECORD_DIR).exists()
    found = shared_ids(tmp_path / "reader-pod" / "ws")
    assert {p for p, _, _ in found["pay-bands"]} == {"docs/hr", "docs/public"}

    (src / "public" / "bands.md").unlink()
    (src / "public" / "canteen.md").write_text("---\nid: canteen\nacl: [staff]\n---\nThe canteen opens at noon.\n")
    catalog = Catalog(store(tmp_path / "pod-b" / "ws", "docs/public").catalog_path)
    publish_documents(catalog, IngestSettings(sources=[str(src)]).for_partition(
        resolve([str(src)], "docs/public", tmp_path / "pod-b" / "ws")))
    catalog.close()
    assert shared_ids(tmp_path / "reader-pod" / "ws") == {}
