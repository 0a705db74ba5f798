"""A reader's tables held in memory and patched by each newer publish: what every snapshot reads stays exact."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_snapshots import document_rows, publish

from rag.store import held_read_state, snapshot_files
from rag.store.catalog import Catalog
from rag.store.snapshot_files import read_pointer

TABLES = ("documents", "units", "unit_members", "publish_log", "quarantine", "store_identity", "workspace_settings",
          "acl_changes")


def _docs(cat: Catalog, version: str, texts: dict[str, str]) -> None:
    ids, n = list(texts), len(texts)
    cat.insert_documents({"doc_id": ids, "version": [version] * n, "title": ids, "text": list(texts.values()),
                          "acl": [["g"]] * n, "links": [[]] * n, "content_hash": [f"{d}:{t}" for d, t in texts.items()],
                          "status": ["current"] * n})


def _tables(cat: Catalog, held: dict | None = None) -> dict[str, list[str]]:
    """Every published table's rows (readers' columns, in a fixed order), and each current document's text; the
    documents are `held` (test_snapshots.publish: the writer's and the history it dropped) when given."""
    out = {}
    present = {t for (t,) in cat.rows("SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM "
                                      "duckdb_views()")}
    for table in TABLES:
        if table not in present:
            continue
        cols = sorted(r[0] for r in cat.rows(f"DESCRIBE {table}")
                      if r[0] not in (*snapshot_files.WRITER_ONLY.get(table, ()), "text"))
        out[table] = sorted(map(repr, cat.rows(f"SELECT {', '.join(cols)} FROM {table}")))
    if held is not None:
        out["documents"] = sorted(r for _, r in held.values())
    current = f"SELECT doc_id, version, text FROM {cat.with_texts} WHERE status = 'current'"
    out["texts"] = sorted(map(repr, cat.rows(current)))
    return out


def _published(folder, texts: dict[str, str]) -> Catalog:
    """A writer's catalog holding these documents at version 1, published once."""
    cat = Catalog(folder / "catalog.duckdb")
    _docs(cat, "1", texts)
    cat.publish_snapshot(cat.begin_publish([]))
    return cat


def _revise(cat: Catalog, doc: str, version: int) -> None:
    cat.con.execute("UPDATE documents SET status = 'superseded', valid_to = now() WHERE doc_id = ? AND "
                    "status = 'current'", [doc])
    _docs(cat, str(version), {doc: f"text of {doc}, version {version}"})


def test_a_newer_publish_patches_the_held_tables_and_an_open_reader_keeps_its_own(tmp_path, monkeypatch):
    cat = _published(tmp_path, {f"d{k}": f"text {k}" for k in range(20)})
    first = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    before = _tables(first)
    built = []
    monkeypatch.setattr(held_read_state.HeldState, "_build_table",
                        lambda self, table, files: built.append(table))  # fails the comparison below if called
    held = document_rows(cat)
    _revise(cat, "d3", 2)
    cat.con.execute("DELETE FROM documents WHERE doc_id = 'd4'")
    held = publish(cat, held)
    second = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    assert built == []  # opened from the held tables and the new segments alone
    assert _tables(second) == _tables(cat, held)
    assert _tables(first) == before  # the reader still on the first publish sees it unchanged
    assert ("d3", "1", "text 3") in first.rows("SELECT doc_id, version, text FROM documents WHERE doc_id = 'd3'")
    for reader in (first, second):
        reader.close()
    cat.close()


def test_a_newer_publishs_shared_file_is_the_last_one_patched_not_built_again(tmp_path, monkeypatch):
    cat, shared = _published(tmp_path, {f"d{k}": f"text {k}" for k in range(20)}), tmp_path / "read_state"
    first = Catalog.snapshot(tmp_path, read_pointer(tmp_path), shared=shared)  # writes the first file, built
    before = _tables(first)
    built = []
    monkeypatch.setattr(held_read_state.HeldState, "_build_table",
                        lambda self, table, files: built.append(table))  # fails the comparison below if called
    held = document_rows(cat)
    for version in (2, 3):
        _revise(cat, "d3", version)
        cat.con.execute(f"DELETE FROM documents WHERE doc_id = 'd{version + 2}'")
        cat.con.execute("INSERT INTO quarantine VALUES (?, 'rejected', 'x.md', 'x.md', 'bad', now())", [version])
        held = publish(cat, held)
        second = Catalog.snapshot(tmp_path, read_pointer(tmp_path), shared=shared)
        assert built == []  # a copy of the last file, patched with the new segments alone
        assert _tables(second) == _tables(cat, held)
        second.close()
    assert len(list(shared.glob("catalog-*.duckdb"))) == 3
    assert _tables(first) == before  # the reader of the first publish still reads its own file
    first.close()
    cat.close()


def test_a_held_state_with_many_dead_rows_is_rebuilt_so_memory_stays_flat(tmp_path, monkeypatch):
    monkeypatch.setattr(held_read_state, "DEAD_SHARE", 0.05)
    cat = _published(tmp_path, {f"d{k}": f"text {k}" for k in range(20)})
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    held, documents = reader._held, document_rows(cat)
    for version in range(2, 5):
        _revise(cat, "d1", version)
        documents = publish(cat, documents)
        reader.close()
        reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
        assert _tables(reader) == _tables(cat, documents)
    assert reader._held is not held and reader._held.dead < 0.05 * reader._held.live
    reader.close()
    cat.close()


def test_a_store_made_anew_under_the_same_path_is_never_read_from_the_old_ones_tables(tmp_path):
    cat = _published(tmp_path, {"a": "the first store's text"})
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    cat.close()
    for path in sorted(tmp_path.rglob("*"), reverse=True):
        if path.is_file() or path.is_symlink():
            path.unlink()
        elif path.is_dir():
            path.rmdir()
    cat = _published(tmp_path, {"b": "the second store's text"})  # the first store's sequence and segment names
    fresh = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    assert fresh.rows("SELECT doc_id FROM documents") == [("b",)]
    for c in (reader, fresh, cat):
        c.close()


_CHANGES = {
    "add": lambda cat, doc, n: _revise(cat, doc, n),
    "supersede": lambda cat, doc, n: cat.con.execute(
        "UPDATE documents SET status = 'superseded', valid_to = now() WHERE doc_id = ?", [doc]),
    "delete": lambda cat, doc, n: cat.con.execute("DELETE FROM documents WHERE doc_id = ?", [doc]),
    "acl": lambda cat, doc, n: cat.con.execute("UPDATE documents SET acl = ['g', ?] WHERE doc_id = ?", [f"x{n}", doc]),
    "problem": lambda cat, doc, n: cat.con.execute(
        "INSERT INTO quarantine VALUES (?, 'rejected', ?, ?, 'bad', now())", [n, doc, doc]),
    "setting": lambda cat, doc, n: cat.set_setting(f"key {doc}", f"value {n}"),
}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from([*_CHANGES, "publish"]), st.integers(0, 5)), min_size=1, max_size=30))
def test_a_reader_opened_at_each_publish_beside_the_previous_one_reads_the_writers_tables(tmp_path_factory,
                                                                                         monkeypatch, ops):
    """Whatever changed, with segments merged and dead rows rebuilt along the way; each reader opens while the
    previous one is still open (as a serving worker does), and that one still reads its own publish."""
    monkeypatch.setattr(snapshot_files, "MAX_SEGMENTS", 3)
    monkeypatch.setattr(held_read_state, "DEAD_SHARE", 0.5)
    ws = tmp_path_factory.mktemp("ws")
    cat = _published(ws, {})
    readers: list[tuple[Catalog, dict]] = []
    held = document_rows(cat)
    try:
        for n, (op, k) in enumerate([*ops, ("publish", 0)], start=2):  # n: a version newer than any before
            if op != "publish":
                _CHANGES[op](cat, f"d{k}", n)
                continue
            held = publish(cat, held)
            reader = Catalog.snapshot(ws, read_pointer(ws))
            assert _tables(reader) == _tables(cat, held)
            if readers:
                previous, seen = readers.pop()
                assert _tables(previous) == seen
                previous.close()
            readers.append((reader, _tables(reader)))
    finally:
        for reader, _ in readers:
            reader.close()
        cat.close()


def test_a_column_the_held_tables_lack_builds_them_anew(tmp_path):
    cat = _published(tmp_path, {"a": "text a"})
    first = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    cat.con.execute("ALTER TABLE units ADD COLUMN reviewer VARCHAR")
    cat.con.execute("INSERT INTO units (unit_id, unit_version, acl, status, reviewer) VALUES "
                    "('u1', 1, ['g'], 'current', 'ann')")
    cat.publish_snapshot(cat.begin_publish([]))
    second = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    assert second.rows("SELECT unit_id, reviewer FROM units") == [("u1", "ann")]
    assert first.rows("SELECT count(*) FROM units") == [(0,)]
    for c in (first, second, cat):
        c.close()


def test_an_older_manifest_gets_tables_of_its_own(tmp_path):
    cat = _published(tmp_path, {"a": "text a"})
    first = read_pointer(tmp_path)
    _revise(cat, "a", 2)
    cat.publish_snapshot(cat.begin_publish([]))
    newest = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    older = Catalog.snapshot(tmp_path, first)
    assert older.rows("SELECT version FROM documents WHERE status = 'current'") == [("1",)]
    assert newest.rows("SELECT version FROM documents WHERE status = 'current'") == [("2",)]
    assert older._held is not newest._held
    for c in (older, newest, cat):
        c.close()


def test_a_missing_manifest_is_a_one_line_error(tmp_path):
    cat = _published(tmp_path, {"a": "text a"})
    info = read_pointer(tmp_path)
    info.path(tmp_path).unlink()
    with pytest.raises(Exception, match="cannot open the catalog") as err:
        Catalog.snapshot(tmp_path, info)
    assert "\n" not in str(err.value)
    cat.close()


def test_a_reader_of_the_shared_file_reopened_gives_back_the_blocks_its_reads_cached_and_reads_the_same(tmp_path):
    cat = _published(tmp_path, {f"d{k}": f"text {k}" for k in range(20000)})
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path), shared=tmp_path / "read_state")
    cached = "SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() WHERE tag = 'BASE_TABLE'"
    [(opened,)] = reader.rows(cached)
    before = _tables(reader)
    [(read,)] = reader.rows(cached)
    assert read >= opened + 4 * 2**18  # a build's reads keep the file's blocks (256 KiB each) in the buffer pool
    reader.reopen()
    assert reader.rows(cached) == [(opened,)]
    assert _tables(reader) == before
    reader.close()
    cat.close()


def test_a_reader_holding_its_tables_in_memory_and_the_writer_keep_their_connection_when_reopened(tmp_path):
    cat = _published(tmp_path, {f"d{k}": f"text {k}" for k in range(20)})
    held = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    for catalog in (held, cat):
        con = catalog.con
        catalog.reopen()
        assert catalog.con is con
    assert _tables(held) == _tables(cat, document_rows(cat))
    held.close()
    cat.close()
