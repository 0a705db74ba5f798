"""The read side: published snapshots that readers use while a real writer process re-publishes."""
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import REPO

from pipelines.ingest_run import run_ingest
from rag.query.workspace import Workspace, WorkspaceError
from rag.retrieval.callers import Caller
from rag.retrieval.read_state import WARM_PARTS
from rag.store.catalog import Catalog
from rag.store.publish import publish_documents
from rag.store.settings import IngestSettings
from rag.store.snapshot_files import SNAPSHOT_DIR, read_pointer

EVERYONE = Caller(frozenset({"field-engineering", "support", "partners", "security-team", "everyone"}))
QUESTIONS = ["How long does the offline cache hold telemetry?", "Which error code means the cache is full?",
             "How are certificates rotated?", "At what size do gateway logs rotate?", "How do I ground the gateway?"]


def reversion_a_third(corpus: Path) -> set[str]:
    """Give every third single-version document a new version label and new text; return their file stems."""
    files = sorted(p for p in corpus.rglob("*.md") if "." not in p.stem)
    changed = set()
    for path in files[::3]:
        head, body = path.read_text().split("\n---\n", 1)
        lines = [line for line in head.splitlines() if not line.startswith("version:")]
        path.write_text("\n".join(lines + ['version: "2099"']) + f"\n---\n{body}\nRevised in 2099.\n")
        changed.add(path.stem)
    return changed


def versions(workspace: Path) -> dict[str, str]:
    snap = Workspace(workspace).snapshot()
    return {r.doc_id: r.doc_version for rows in snap.current.members.values() for r in rows}


def check_state(result, old: dict[str, str], new: dict[str, str], texts) -> None:
    """Every item is a current version of the old state or of the new one, with that version's own text."""
    seen: dict[str, str] = {}
    for item in result.items:
        assert item.doc_version in {old.get(item.doc_id), new.get(item.doc_id)}, (item.doc_id, item.doc_version)
        assert seen.setdefault(item.doc_id, item.doc_version) == item.doc_version  # one version per document
        (start, end), = item.ranges
        assert texts[(item.doc_id, item.doc_version)][start:end] in item.text


@pytest.mark.slow
def test_readers_keep_answering_while_a_real_ingest_republishes_a_third(corpus, workspace, embedder):
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    old, before = versions(workspace), datetime.now(timezone.utc).replace(tzinfo=None)
    changed = reversion_a_third(corpus)
    reader = Workspace(workspace, embedder=embedder)
    writer = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "ingest", "--source", str(corpus),
                               "--workspace", str(workspace), "--json"], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    results, snapshots, past = [], set(), []
    while writer.poll() is None:
        for method in ("longrag", "shortchunk", "elite"):
            results.append(reader.retrieve(method, EVERYONE, QUESTIONS[len(results) % len(QUESTIONS)], 3000))
            snapshots.add(reader.snapshot().info.seq)
        past.append(reader.retrieve("longrag", EVERYONE, QUESTIONS[len(past) % len(QUESTIONS)], 3000, as_of=before))
    out, err = writer.communicate()
    assert writer.returncode == 0, err
    assert json.loads(out)["checks_passed"] is True
    new = versions(workspace)
    assert len(changed) >= 5 and sum(v == "2099" for v in new.values()) == len(changed)
    assert len(results) >= 6 and len(past) >= 2 and len(snapshots) >= 2  # queries before, during and after the publishes
    catalog = Workspace(workspace).snapshot().catalog
    texts = {k: t for k, (_, t) in catalog.document_texts(catalog.rows("SELECT doc_id, version FROM documents")).items()}
    for result in results:
        check_state(result, old, new, texts)
    for result in past:  # as of before the writer started: the old versions only, whatever it had published
        check_state(result, old, {}, texts)
    final = Workspace(workspace, embedder=embedder)
    for question in QUESTIONS:
        for method in ("longrag", "shortchunk", "elite"):
            check_state(final.retrieve(method, EVERYONE, question, 3000), {}, new, texts)


def test_a_reader_never_takes_the_writer_lock_and_sees_a_publish_at_its_next_query(tmp_path, corpus, embedder):
    ws = tmp_path / "ws"
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    writer = Catalog(ws / "catalog.duckdb")  # this process now holds the writer lock and the DuckDB file
    holder = subprocess.run([sys.executable, "-c", _READ_IN_ANOTHER_PROCESS, str(ws)], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert holder.returncode == 0, holder.stderr
    assert "edge-offline-cache" in holder.stdout

    reader = Workspace(ws, embedder=embedder)
    support = Caller(frozenset({"support"}))
    before = reader.snapshot().info.seq
    assert "edge-offline-cache" in {i.doc_id for i in reader.retrieve("longrag", support, QUESTIONS[0], 2000).items}
    for p in corpus.rglob("offline-cache.*.md"):
        p.unlink()
    publish_documents(writer, IngestSettings(sources=[str(corpus)]))  # the documents step only
    for method in ("longrag", "shortchunk", "elite"):
        ids = {i.doc_id for i in reader.retrieve(method, support, QUESTIONS[0], 2000).items}
        assert "edge-offline-cache" not in ids
    assert reader.snapshot().info.seq == before + 1
    writer.close()


_READ_IN_ANOTHER_PROCESS = """
import sys
from rag.retrieval.callers import Caller
from rag.query.workspace import Workspace
result = Workspace(sys.argv[1]).retrieve("longrag", Caller(frozenset({"support"})),
                                         "How long does the offline cache hold telemetry?", 2000)
print(" ".join(i.doc_id for i in result.items))
"""


def test_old_snapshots_are_pruned_but_history_and_as_of_reads_use_the_newest(tmp_path, corpus, embedder):
    ws = tmp_path / "ws"
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    for k in range(5):
        (corpus / "operations" / f"note-{k}.md").write_text(
            f"---\nid: note-{k}\ntitle: Shift note {k}\nacl: [support]\n---\nShift note number {k}.\n")
        run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    files = sorted(p.name for p in (ws / SNAPSHOT_DIR).glob("*.json"))  # manifests; segments are shared
    assert len(files) == 4 and files[-1] == read_pointer(ws).file
    versions_, _ = Workspace(ws).snapshot().catalog.history("note-0")
    assert [v.version for v in versions_] == ["1"]


def test_a_workspace_without_a_publish_or_that_is_a_file_is_a_one_line_error(tmp_path):
    with pytest.raises(WorkspaceError, match="nothing published yet"):
        Workspace(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(WorkspaceError, match="is a file"):
        Workspace(tmp_path / "file")


def test_a_new_version_recorded_but_not_yet_indexed_is_served_instead_of_nothing(tmp_path, corpus, embedder):
    """After the documents step (or a run killed right after it) LongRAG serves the new text, never the old."""
    ws = tmp_path / "ws"
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    old = corpus / "operations" / "offline-cache.2026.md"
    (corpus / "operations" / "offline-cache.2027.md").write_text(
        old.read_text().replace('version: "2026"', 'version: "2027"').replace("7 days", "9 days"))
    writer = Catalog(ws / "catalog.duckdb")
    publish_documents(writer, IngestSettings(sources=[str(corpus)]))
    writer.close()
    result = Workspace(ws, embedder=embedder).retrieve("longrag", Caller(frozenset({"support"})),
                                                       "How long does the offline cache hold telemetry?", 4000)
    cache = [i for i in result.items if i.doc_id == "edge-offline-cache"]
    assert [i.doc_version for i in cache] == ["2027"] and "9 days" in cache[0].text
    assert "7 days" not in result.context()


@pytest.mark.slow
def test_a_server_building_a_publish_between_requests_hides_deletions_and_revocations_at_once(tmp_path, corpus,
                                                                                              embedder):
    ws = tmp_path / "ws"
    run_ingest(IngestSettings(workspace=str(ws), sources=[str(corpus)]))
    reader, queued = Workspace(ws, embedder=embedder), []
    reader.build_between(queued.append)  # a server's retrieval queue, here run by hand
    support, before = Caller(frozenset({"support"})), reader.snapshot().info.seq
    questions = {"edge-offline-cache": QUESTIONS[0], "error-codes-reference": QUESTIONS[1]}
    for doc_id, question in questions.items():
        assert doc_id in {i.doc_id for i in reader.retrieve("longrag", support, question, 2000).items}
    for p in corpus.rglob("offline-cache.*.md"):
        p.unlink()
    codes = corpus / "operations" / "error-codes.md"
    codes.write_text(codes.read_text().replace("acl: [field-engineering, support, partners]", "acl: [partners]", 1))
    writer = Catalog(ws / "catalog.duckdb")
    publish_documents(writer, IngestSettings(sources=[str(corpus)]))  # the documents step only
    writer.close()
    for method in ("longrag", "shortchunk", "elite"):
        for doc_id, question in questions.items():
            assert doc_id not in {i.doc_id for i in reader.retrieve(method, support, question, 2000).items}
    assert reader.snapshot().info.seq == before and queued  # answered from the old read state, filtered
    while queued:
        queued.pop(0)()
    assert reader.snapshot().info.seq == before + 1
    for doc_id, question in questions.items():
        assert doc_id not in {i.doc_id for i in reader.retrieve("longrag", support, question, 2000).items}
    partner = Caller(frozenset({"partners"}))
    assert "error-codes-reference" in {i.doc_id for i in reader.retrieve("longrag", partner, QUESTIONS[1], 2000).items}


def test_a_snapshot_reads_each_version_its_own_title_and_text_a_current_one_by_its_hash(corpus, workspace):
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    reversion_a_third(corpus)
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    snap = Workspace(workspace).snapshot()
    every = [tuple(k) for k in snap.catalog.rows("SELECT doc_id, version FROM documents")]
    current = [k for k in every if snap.current.content_hash(*k)]
    assert 0 < len(current) < len(every)  # superseded versions too: read through the documents
    assert snap.texts(every) == snap.catalog.document_texts(every)
    assert len(snap.catalog.texts_of([snap.current.content_hash(*k) for k in current])) == len(
        {snap.current.content_hash(*k) for k in current})  # the current ones were found by hash


def test_a_built_part_leaves_none_of_what_its_catalog_reads_cached_with_the_reader(corpus, workspace):
    run_ingest(IngestSettings(workspace=str(workspace), sources=[str(corpus)]))
    snap = Workspace(workspace).snapshot()
    cached = "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'BASE_TABLE'"
    [(opened,)] = snap.catalog.rows(cached)
    for part in WARM_PARTS:
        snap.build(part)
        assert snap.catalog.rows(cached) == [(opened,)], part
    assert snap.texts(snap.members(list(snap.current.unit_of.values())))  # and it still reads
