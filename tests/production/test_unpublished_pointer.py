"""A store a writer took but never published (moto's S3 server, Postgres, on loopback): the lease grant leaves a
pointer naming its epoch and no publish, which fences a writer that lost the lease, and which every reader takes for
nothing published yet: a pull, the sensor's view of the bucket, `rag serve`'s workspace. The checkpoint's pointer is
fenced the same way."""
import json
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers import postgres, s3_env, s3_server  # noqa: F401 (fixtures)
from test_writer_lease import pods  # noqa: F401 (fixture)

from rag.models.tokens import default_counter
from rag.query.workspace import Workspace, WorkspaceError
from rag.retrieval.callers import Caller
from rag.sources.partitions import claim_store, resolve, store, unpublished, vanished
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.object_store import ObjectStore
from rag.store.publish import IngestSettings, publish_documents, publish_index, publish_units
from rag.store.snapshot_files import NoSnapshot, read_pointer
from rag.store.snapshot_pull import pull
from rag.store.store_checkpoint import CheckpointMoved, restore, save

STAFF = Caller(frozenset({"staff"}))


@pytest.fixture
def bucket(s3_env, monkeypatch):
    monkeypatch.setenv("RAG_SNAPSHOT_URI", f"s3://{s3_env['bucket']}/ws")
    monkeypatch.setenv("RAG_SNAPSHOT_POLL_S", "0")
    return ObjectStore(f"s3://{s3_env['bucket']}/ws")


def source_with(root, **texts):
    """A source folder with one document per collection, readable by staff."""
    for name, text in texts.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / f"{name}.md").write_text(f"---\nid: {name}-doc\nacl: [staff]\n---\n{text}\n")
    return root


def test_a_store_a_writer_took_but_never_published_is_read_as_nothing_published(bucket, tmp_path):
    src = source_with(tmp_path / "docs", hr="The pay band for grade 7 is 91,000 euros.", public="Bands change.")
    taken = store(tmp_path / "pod-a" / "ws", "docs/hr")
    prefix = f"partitions/{taken.folder.name}/"
    claim_store(taken)
    bucket.put(prefix + "snapshots/00000001.json", b"{}")   # a publish whose writer died before its swap
    restore(taken.folder, 1)
    again = store(tmp_path / "pod-b" / "ws", "docs/hr")
    restore(again.folder, 2)
    assert json.loads(bucket.get(prefix + "snapshots/CURRENT").body) == {"epoch": 2, "seq": 0}
    assert json.loads(bucket.get(prefix + "checkpoint/CURRENT").body) == {"epoch": 2}
    assert bucket.keys(prefix + "snapshots/") == [bucket.key(prefix + "snapshots/CURRENT")]
    resolve([str(src)], "docs/hr", tmp_path / "pod-b" / "ws")   # the run's own view of its store
    assert not (again.folder / "snapshots" / "CURRENT").exists()

    reader = tmp_path / "reader-pod" / "ws"
    pull(reader)
    assert not list(reader.rglob("CURRENT"))
    with pytest.raises(WorkspaceError, match="nothing published yet"):
        Workspace(reader)
    sensor = tmp_path / "sensor" / "ws"
    assert [s.key for s in unpublished([str(src)], sensor)] == ["docs/hr", "docs/public"]
    assert not list(sensor.rglob("CURRENT"))
    (src / "hr" / "hr.md").unlink()
    (src / "hr").rmdir()
    assert vanished([str(src)], tmp_path / "sensor-2" / "ws") == []   # nothing published, so nothing to delete

    local = again.folder / "snapshots" / "CURRENT"
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(json.dumps({"epoch": 2, "seq": 0}))
    with pytest.raises(NoSnapshot, match=r"nothing published yet \(it names no publish yet\)"):
        read_pointer(again.folder)


@pytest.mark.parametrize("checkpointed", [False, True], ids=["first-checkpoint", "later-checkpoint"])
def test_a_writer_that_lost_its_lease_after_its_last_check_cannot_make_its_checkpoint_current(
        bucket, tmp_path, checkpointed):
    """Restore stamps the checkpoint's pointer too: the swap of a writer that lost the lease after its lease check
    (paused right before the swap) names a version that is gone, and the holder's checkpoint is the one kept."""
    pod = lambda name: tmp_path / name / "ws"  # noqa: E731
    epoch = 1
    if checkpointed:
        first = restore(pod("pod-0"), epoch)
        (pod("pod-0") / "doc_ids.json").write_text('"first"')
        save(pod("pod-0"), first, lambda: None)
        epoch += 1
    stale = restore(pod("pod-a"), epoch)
    holder = restore(pod("pod-b"), epoch + 1)
    (pod("pod-a") / "doc_ids.json").write_text('"stale"')
    with pytest.raises(CheckpointMoved, match="another writer checkpointed this store"):
        save(pod("pod-a"), stale, lambda: None)
    (pod("pod-b") / "doc_ids.json").write_text('"holder"')
    save(pod("pod-b"), holder, lambda: None)
    restore(pod("pod-c"), epoch + 2)
    assert (pod("pod-c") / "doc_ids.json").read_text() == '"holder"'


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["take", "checkpoint"]), st.integers(0, 2)), min_size=1, max_size=8))
def test_a_checkpoint_is_made_current_only_by_a_writer_nobody_took_the_store_from_since_it_last_wrote(
        s3_env, monkeypatch, steps):
    """Writers take the store (a lease grant, with the next epoch) and checkpoint in any order, each as if its lease
    check passed: a checkpoint succeeds exactly when no grant and no other checkpoint came since its writer's own
    grant or last checkpoint, and a new writer restores the last one that succeeded."""
    monkeypatch.setenv("RAG_SNAPSHOT_URI", f"s3://{s3_env['bucket']}/{uuid.uuid4().hex}")
    with tempfile.TemporaryDirectory() as tmp:
        pod = lambda w: Path(tmp) / f"pod-{w}" / "ws"  # noqa: E731
        taken, expects, version, epoch, kept = {}, {}, 0, 0, None
        for step, w in steps:
            if step == "take":
                epoch, version = epoch + 1, version + 1
                taken[w], expects[w] = restore(pod(w), epoch), version
            elif w in taken:
                body = json.dumps([w, version])
                (pod(w) / "doc_ids.json").write_text(body)
                try:
                    save(pod(w), taken[w], lambda: None)
                    made = True
                except CheckpointMoved:
                    made = False
                assert made == (expects[w] == version), (step, w)
                if made:
                    version, kept = version + 1, body
                    expects[w] = version
        restore(pod("new"), epoch + 1)
        restored = pod("new") / "doc_ids.json"
        assert (restored.read_text() if restored.exists() else None) == kept


def publish_partition(ws, src, key, lance, embedder, catalog=None):
    """One partition's three steps, as its run does them (the catalog opened here unless given)."""
    s = store(ws, key, lance)
    claim_store(s)
    catalog = catalog or Catalog(s.catalog_path)
    settings = IngestSettings(sources=[str(src)], collection=key).for_partition(resolve([str(src)], key, ws))
    publish_documents(catalog, settings)
    publish_units(catalog, default_counter(), settings)
    publish_index(catalog, SubchunkIndex(s.lance_uri), embedder.encode, default_counter(), settings)
    catalog.close()


@pytest.mark.slow
def test_serve_answers_from_the_published_partitions_while_another_is_taken_and_not_yet_published(
        pods, tmp_path, monkeypatch, embedder):  # noqa: F811 (the fixture)
    monkeypatch.setenv("RAG_SNAPSHOT_POLL_S", "0")
    lance = pods["env"]["RAG_SNAPSHOT_URI"].rsplit("/", 1)[0] + "/index"
    src = source_with(tmp_path / "docs", hr="The pay band for grade 7 is 91,000 euros.",
                      canteen="The canteen opens at noon and closes at three.")
    publish_partition(tmp_path / "pod-a" / "ws", src, "docs/hr", lance, embedder)
    taken = store(tmp_path / "pod-b" / "ws", "docs/canteen", lance)
    claim_store(taken)
    holder = Catalog(taken.catalog_path, entry="pod b")   # the lease is held; nothing published yet
    bucket = ObjectStore(pods["env"]["RAG_SNAPSHOT_URI"])
    assert "file" not in json.loads(bucket.get(f"partitions/{taken.folder.name}/snapshots/CURRENT").body)

    reader = Workspace(tmp_path / "reader-pod" / "ws", embedder=embedder)
    ids = lambda q: {i.doc_id for i in reader.retrieve("longrag", STAFF, q, 1500).items}  # noqa: E731
    assert set(reader.snapshot().parts) == {"docs/hr"}
    assert "hr-doc" in ids("What is the pay band for grade 7?")

    publish_partition(tmp_path / "pod-b" / "ws", src, "docs/canteen", lance, embedder, holder)
    assert set(reader.snapshot().parts) == {"docs/hr", "docs/canteen"}
    assert "canteen-doc" in ids("When does the canteen open?")
