"""Published read state: each publish writes only what changed, and readers see exactly the catalog's tables."""
from __future__ import annotations

import json
import shutil

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rag.store import snapshot_files as snapshots
from rag.store.catalog import Catalog
from rag.store.schema import SCHEMA
from rag.store.snapshot_files import SEGMENT_DIR, SNAPSHOT_DIR, read_pointer

TABLES = ("documents", "units", "unit_members", "publish_log", "quarantine", "store_identity")


def _doc(cat: Catalog, doc_id: str, version: str, text: str, status: str = "current") -> None:
    _docs(cat, version, {doc_id: text}, status)


def _docs(cat: Catalog, version: str, texts: dict[str, str], status: str = "current") -> None:
    """Documents at one version in one insert (one by one, 200 of them cost ~8 CPU s of DuckDB round trips)."""
    ids, n = list(texts), len(texts)
    cat.insert_documents({"doc_id": ids, "version": [version] * n, "title": ids, "text": list(texts.values()),
                          "acl": [["g"]] * n, "links": [[]] * n, "content_hash": [f"{d}:{t}" for d, t in texts.items()],
                          "status": [status] * n})


def published_columns(cat: Catalog, table: str, also_left_out: tuple[str, ...] = ()) -> str:
    return ", ".join(sorted(r[0] for r in cat.rows(f"DESCRIBE {table}")
                            if r[0] not in (*snapshots.WRITER_ONLY.get(table, ()), *also_left_out)))


def publish(cat: Catalog, held: dict | None = None) -> dict:
    """Publish, and give what readers must then hold of `documents` (status and row repr by key): the writer's rows
    as published, and the rows not current published before whose key the writer has dropped since (history)."""
    now = document_rows(cat)
    history = {k: r for k, r in (held or {}).items() if k not in now and r[0] != "current"}
    cat.publish_snapshot(cat.begin_publish([]))
    return {**history, **now}


def document_rows(cat: Catalog) -> dict:
    """The writer's documents as `publish` gives them: (status, row repr) by key."""
    cols = published_columns(cat, "documents", ("text",))
    return {(r[0], r[1]): (r[2], repr(r[3:])) for r in cat.rows(f"SELECT doc_id, version, status, {cols} FROM documents")}


def held_documents(reader: Catalog, writer: Catalog) -> list[str]:
    """The reader's documents as `publish` gives them (row reprs), sorted."""
    return sorted(map(repr, reader.rows(f"SELECT {published_columns(writer, 'documents', ('text',))} FROM documents")))


def _same_as_writer(writer: Catalog, workspace, held: dict | None = None) -> None:
    """The reader's tables are the writer's; its documents are `held` (see `publish`) when given."""
    reader = Catalog.snapshot(workspace, read_pointer(workspace))
    try:
        for table in TABLES:
            if table == "documents" and held is not None:
                assert held_documents(reader, writer) == sorted(r for _, r in held.values())
                continue
            cols = published_columns(writer, table)
            assert sorted(map(repr, reader.rows(f"SELECT {cols} FROM {table}"))) == \
                sorted(map(repr, writer.rows(f"SELECT {cols} FROM {table}"))), table
    finally:
        reader.close()


def _segment_rows(workspace, seq: int) -> dict[str, int]:
    folder = workspace / SNAPSHOT_DIR / SEGMENT_DIR
    return {p.name[9:-8].split("-")[0]: duckdb.sql(f"SELECT count(*) FROM '{p}'").fetchall()[0][0]
            for p in folder.glob(f"{seq:08d}-*.parquet")}


def test_a_one_document_edit_writes_only_its_rows(tmp_path):
    cat = Catalog(tmp_path / "catalog.duckdb")
    _docs(cat, "1", {f"d{k}": f"text number {k} " * 20 for k in range(200)})
    held = publish(cat)
    cat.con.execute("UPDATE documents SET status = 'superseded' WHERE doc_id = 'd7'")
    _doc(cat, "d7", "2", "a revised text")
    held = publish(cat, held)
    rows = _segment_rows(tmp_path, 2)
    # the old and the new version, the new text, the new publish and the earlier one (now marked interrupted)
    assert rows == {"documents": 2, "texts": 1, "publish_log": 2}
    _same_as_writer(cat, tmp_path, held)
    assert ("d7", "1") not in {(d, v) for d, v in cat.rows("SELECT doc_id, version FROM documents")}  # history
    cat.close()


def test_segments_hold_what_readers_read_and_a_segment_from_before_is_not_written_again(tmp_path):
    cat = Catalog(tmp_path / "catalog.duckdb")
    _docs(cat, "1", {f"d{k}": f"text number {k}" for k in range(20)})
    state = publish(cat)
    base = tmp_path / SNAPSHOT_DIR / SEGMENT_DIR / "00000001-documents.parquet"
    held = [r[0] for r in duckdb.sql(f"DESCRIBE SELECT * FROM '{base}'").fetchall()]
    assert "_h" not in held and not set(held) & set(snapshots.WRITER_ONLY["documents"])
    # the layout before: a row hash and the writer's columns in every segment
    duckdb.sql(f"COPY (SELECT *, hash(doc_id) AS _h, 'm' AS meta_hash FROM '{base}') TO '{base}.old' (FORMAT parquet)")
    shutil.move(f"{base}.old", base)
    _same_as_writer(cat, tmp_path)
    cat.con.execute("UPDATE documents SET status = 'deleted' WHERE doc_id = 'd3'")
    state = publish(cat, state)
    assert _segment_rows(tmp_path, 2)["documents"] == 1  # only the deleted version's row
    _same_as_writer(cat, tmp_path, state)
    cat.close()


def test_a_reader_keeps_its_state_while_later_publishes_land(tmp_path):
    cat = Catalog(tmp_path / "catalog.duckdb")
    _doc(cat, "a", "1", "first text")
    cat.publish_snapshot(cat.begin_publish([]))
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    for k in range(snapshots.snapshots_kept() - 1):  # the manifests this reader's segments are kept for
        cat.con.execute("UPDATE documents SET status = 'deleted' WHERE doc_id = 'a'")
        _doc(cat, f"b{k}", "1", f"other text {k}")
        cat.publish_snapshot(cat.begin_publish([]))
    assert reader.document_texts([("a", "1")]) == {("a", "1"): ("a", "first text")}
    assert reader.rows("SELECT doc_id, status FROM documents") == [("a", "current")]
    reader.close()
    cat.close()


def test_a_readers_fingerprint_is_computed_once_and_the_writers_follows_each_change(tmp_path, monkeypatch):
    cat = Catalog(tmp_path / "catalog.duckdb")
    _doc(cat, "a", "1", "first text")
    cat.publish_snapshot(cat.begin_publish([]))
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    first = reader.current_fingerprint()
    assert first == cat.current_fingerprint()
    monkeypatch.setattr(reader, "rows", lambda *a: pytest.fail("a published snapshot's fingerprint was asked twice"))
    assert reader.current_fingerprint() == first
    _doc(cat, "b", "1", "second text")
    assert cat.current_fingerprint() != first  # the writer's changes as they are made
    reader.close()
    cat.close()


def test_nothing_changed_writes_no_segment_and_old_ones_are_pruned(tmp_path):
    cat = Catalog(tmp_path / "catalog.duckdb")
    _doc(cat, "a", "1", "text")
    cat.publish_snapshot(cat.begin_publish([]))
    for _ in range(30):
        cat.publish_snapshot(cat.latest_publish())
    folder = tmp_path / SNAPSHOT_DIR
    assert sorted(p.name for p in folder.glob("*.json")) == [f"{s:08d}.json" for s in range(28, 32)]
    named = {f for m in folder.glob("*.json") for fs in json.loads(m.read_text())["tables"].values() for f in fs}
    assert {p.name for p in (folder / SEGMENT_DIR).glob("*.parquet")} == named
    assert len(named) == 8  # one segment per table (no settings yet): nothing changed after the first publish
    _same_as_writer(cat, tmp_path)
    cat.close()


_ops = st.lists(st.tuples(st.sampled_from(["add", "supersede", "delete", "acl", "problem", "publish"]),
                          st.integers(0, 7)), min_size=1, max_size=40)


def run_ops(cat: Catalog, ws, ops) -> dict:
    """Apply the ops, publishing where they say and at the end, checking each publish; what readers must hold."""
    versions: dict[str, int] = {}
    held: dict = {}
    for op, k in [*ops, ("publish", 0)]:
        doc = f"d{k}"
        if op == "add":
            versions[doc] = versions.get(doc, 0) + 1
            cat.con.execute("UPDATE documents SET status = 'superseded' WHERE doc_id = ?", [doc])
            _doc(cat, doc, str(versions[doc]), f"text {k} v{versions[doc]}")
        elif op == "supersede":
            cat.con.execute("UPDATE documents SET status = 'superseded', valid_to = now() WHERE doc_id = ?", [doc])
        elif op == "delete":
            cat.con.execute("DELETE FROM documents WHERE doc_id = ?", [doc])
            versions.pop(doc, None)
        elif op == "acl":
            cat.con.execute("UPDATE documents SET acl = ['g', ?] WHERE doc_id = ?", [f"x{k}", doc])
        elif op == "problem":
            cat.con.execute("INSERT INTO quarantine VALUES (?, 'rejected', ?, ?, 'bad', now())", [k, doc, doc])
        else:
            held = publish(cat, held)
            _same_as_writer(cat, ws, held)
    return held


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_the_published_tables_always_equal_the_writers(tmp_path_factory, monkeypatch, ops):
    """Whatever rows were added, changed or removed, with segments merged along the way; a removed row that was not
    current stays as history."""
    monkeypatch.setattr(snapshots, "MAX_SEGMENTS", 3)
    ws = tmp_path_factory.mktemp("ws")
    cat = Catalog(ws / "catalog.duckdb")
    try:
        run_ops(cat, ws, ops)
    finally:
        cat.close()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops, lost=st.sampled_from(["pointer", "manifest", "both"]), how=st.sampled_from(["deleted", "garbage"]))
# d1's version 1 becomes history in the lost manifest's own segment; then the same where that publish merges.
@example(ops=[("add", 1), ("publish", 0), ("add", 1)], lost="manifest", how="deleted")
@example(ops=[("add", 1), ("publish", 0)] * 3 + [("add", 2), ("add", 1)], lost="both", how="garbage")
def test_a_lost_pointer_or_manifest_is_published_again_with_every_row_and_its_history(
        tmp_path_factory, monkeypatch, ops, lost, how):
    """The writer's next open publishes again on the newest intact manifest and the segments written after it (merged
    ones too): readers then hold what they held before, history included."""
    monkeypatch.setattr(snapshots, "MAX_SEGMENTS", 3)
    ws = tmp_path_factory.mktemp("ws")
    cat = Catalog(ws / "catalog.duckdb")
    try:
        held = run_ops(cat, ws, ops)
    finally:
        cat.close()
    pointer = ws / SNAPSHOT_DIR / "CURRENT"
    damaged = {"pointer": [pointer], "manifest": [read_pointer(ws).path(ws)],
               "both": [pointer, read_pointer(ws).path(ws)]}[lost]
    for path in damaged:
        path.unlink() if how == "deleted" else path.write_bytes(b"\xff garbage")
    cat = Catalog(ws / "catalog.duckdb")
    try:
        _same_as_writer(cat, ws, held)
    finally:
        cat.close()


def test_a_damaged_segment_is_a_one_line_error(tmp_path):
    cat = Catalog(tmp_path / "catalog.duckdb")
    _doc(cat, "a", "1", "text")
    cat.publish_snapshot(cat.begin_publish([]))
    cat.close()
    for seg in (tmp_path / SNAPSHOT_DIR / SEGMENT_DIR).glob("*-units.parquet"):
        seg.write_bytes(b"garbage" * 100)
    with pytest.raises(Exception, match="cannot open the catalog") as err:
        Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    assert "\n" not in str(err.value)


def test_a_workspace_published_as_whole_copies_is_read_then_moved_to_segments(tmp_path):
    """The format before segments: the pointer named a copy of the catalog file."""
    old = duckdb.connect(str(tmp_path / "catalog.duckdb"))  # a catalog of that time held its texts
    old.execute(SCHEMA.replace("title VARCHAR,", "title VARCHAR, text VARCHAR,", 1))
    old.execute("INSERT INTO documents (doc_id, version, title, text, acl, links, content_hash, status) VALUES "
                "('a', '1', 'a', 'text of a', ['g'], [], 'h', 'current')")
    old.close()
    folder = tmp_path / SNAPSHOT_DIR
    folder.mkdir()
    shutil.copyfile(tmp_path / "catalog.duckdb", folder / "00000001.duckdb")
    (folder / "CURRENT").write_text(json.dumps({"seq": 1, "file": "00000001.duckdb", "publish_id": 1,
                                                "lance_version": None, "created_at": "2026-12-01T00:00:00"}))
    old = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    assert old.document_texts([("a", "1")]) == {("a", "1"): ("a", "text of a")}
    old.close()
    cat = Catalog(tmp_path / "catalog.duckdb")
    cat.publish_snapshot(cat.begin_publish([]))
    assert read_pointer(tmp_path).file == "00000002.json" and not list(folder.glob("*.duckdb"))
    _same_as_writer(cat, tmp_path)
    cat.close()
