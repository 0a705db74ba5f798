"""Texts held once: the writer's catalog names them by hash, the text files hold them, readers read those files."""
from __future__ import annotations

import json

import duckdb

from rag.store.catalog import Catalog
from rag.store.publish import publish_documents
from rag.store.schema import SCHEMA
from rag.store.settings import IngestSettings
from rag.store.snapshot_files import SEGMENT_DIR, SNAPSHOT_DIR, read_pointer


def _columns(cat: Catalog) -> set[str]:
    return {c for (c,) in cat.rows("SELECT column_name FROM duckdb_columns() WHERE table_name = 'documents'")}


def _text_files(ws) -> set[str]:
    return {p.name for p in (ws / SNAPSHOT_DIR / SEGMENT_DIR).glob("*-texts*.parquet")}


def _write(path, docs: list[dict]) -> None:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))


def _read_text(ws, key: tuple[str, str]) -> dict:
    reader = Catalog.snapshot(ws, read_pointer(ws))
    try:
        return reader.document_texts([key])
    finally:
        reader.close()


def test_each_text_is_stored_once_and_readers_read_the_writers_files(tmp_path):
    cat = Catalog(tmp_path / "catalog.duckdb")
    cat.insert_documents({"doc_id": ["a", "b"], "version": ["1", "1"], "title": ["A", "A"],
                          "text": ["same words", "same words"], "content_hash": ["h", "h"],
                          "status": ["current", "current"]})
    cat.publish_snapshot(cat.begin_publish([]))
    assert "text" not in _columns(cat)
    (stored,), = cat.rows("SELECT sum(rows) FROM text_files")
    manifest = json.loads(read_pointer(tmp_path).path(tmp_path).read_text())
    assert stored == 1 and set(manifest["tables"]["texts"]) == _text_files(tmp_path) == set(cat.texts.names())
    cat.publish_snapshot(cat.begin_publish([]))  # nothing new: the same files, no copy
    assert _text_files(tmp_path) == set(cat.texts.names())
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    assert reader.document_texts([("a", "1"), ("b", "1")]) == {("a", "1"): ("A", "same words"),
                                                               ("b", "1"): ("A", "same words")}
    reader.close()
    assert cat.document_texts([("b", "1")]) == {("b", "1"): ("A", "same words")}
    cat.close()


def test_an_older_catalog_moves_its_texts_out_on_the_next_writer_open(tmp_path):
    old = duckdb.connect(str(tmp_path / "catalog.duckdb"))
    old.execute(SCHEMA.replace("title VARCHAR,", "title VARCHAR, text VARCHAR,", 1))
    old.execute("INSERT INTO documents (doc_id, version, title, text, content_hash, status) VALUES "
                "('a', '1', 'A', 'old text', 'h1', 'superseded'), ('a', '2', 'A', 'new text', 'h2', 'current')")
    old.close()
    cat = Catalog(tmp_path / "catalog.duckdb")
    assert "text" not in _columns(cat)
    assert cat.document_texts([("a", "1"), ("a", "2")]) == {("a", "1"): ("A", "old text"),
                                                            ("a", "2"): ("A", "new text")}
    cat.publish_snapshot(cat.begin_publish([]))
    cat.close()
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    assert reader.rows("SELECT text FROM documents WHERE status = 'current'") == [("new text",)]
    reader.close()


def test_a_replaced_text_stays_for_the_retention_and_comes_back_from_its_source_after_it(tmp_path, monkeypatch):
    source, ws = tmp_path / "docs.jsonl", tmp_path / "ws"
    settings = IngestSettings(sources=[str(source)], default_acl=("g",))
    v1 = {"doc_id": "a", "title": "A", "text": "first text", "version": "1"}
    _write(source, [v1, {"doc_id": "b", "title": "B", "text": "other", "version": "1"}])
    cat = Catalog(ws / "catalog.duckdb")
    publish_documents(cat, settings)
    _write(source, [dict(v1, text="second text", version="2"), {"doc_id": "b", "title": "B", "text": "other",
                                                                 "version": "1"}])
    publish_documents(cat, settings)
    assert cat.document_texts([("a", "1")]) == {}  # the writer keeps no version no source holds: the read state does
    assert _read_text(ws, ("a", "1")) == {("a", "1"): ("A", "first text")}  # within the retention
    cat.publish_snapshot(cat.latest_publish())  # another publish keeps it (the writer finds it in the read state)
    assert _read_text(ws, ("a", "1")) == {("a", "1"): ("A", "first text")}
    monkeypatch.setenv("RAG_INDEX_RETENTION_DAYS", "0")
    monkeypatch.setenv("RAG_SNAPSHOTS_KEPT", "1")
    cat.publish_snapshot(cat.latest_publish())
    assert _read_text(ws, ("a", "1")) == {("a", "1"): ("A", None)}
    files = set(cat.texts.names())
    assert _text_files(ws) == files  # the files the replaced text lay in are gone once no snapshot names them
    texts = duckdb.sql("SELECT text FROM read_parquet(?)", params=[[str(ws / SNAPSHOT_DIR / SEGMENT_DIR / f)
                                                                     for f in files]]).fetchall()
    assert sorted(t for (t,) in texts) == ["other", "second text"]
    _write(source, [v1, {"doc_id": "b", "title": "B", "text": "other", "version": "1"}])  # version 2 withdrawn
    publish_documents(cat, settings)
    assert cat.rows("SELECT version FROM documents WHERE doc_id = 'a' AND status = 'current'") == [("1",)]
    assert cat.document_texts([("a", "1")]) == {("a", "1"): ("A", "first text")}
    cat.close()
    reader = Catalog.snapshot(ws, read_pointer(ws))
    assert reader.document_texts([("a", "1")]) == {("a", "1"): ("A", "first text")}
    reader.close()
