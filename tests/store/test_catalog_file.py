"""The writer's catalog file: older files lose their key indexes, and a mostly free file is compacted at close."""
from __future__ import annotations

import duckdb
import pytest

from rag.store.catalog import Catalog
from rag.store.catalog_file import GROWTH_SHARE, MIN_BLOCKS
from rag.store.schema import SCHEMA
from rag.store.snapshot_files import read_pointer
from rag.store.writer_lock import WriterLock

# A catalog from before keys were dropped: documents keyed and without `path_tail`, units keyed.
KEYED = SCHEMA.replace("publish_id BIGINT, path_tail VARCHAR);", "publish_id BIGINT, PRIMARY KEY (doc_id, version));",
                       1).replace("publish_id BIGINT);", "publish_id BIGINT, PRIMARY KEY (unit_id, unit_version));", 1
                                  ).replace("ALTER TABLE documents ADD COLUMN IF NOT EXISTS path_tail VARCHAR;", "")


def _keys(con) -> list:
    return con.execute("SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY' "
                       "AND table_name IN ('documents', 'units')").fetchall()


def _free_blocks(path, column: str = "free_blocks") -> int:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(f"SELECT {column} FROM pragma_database_size()").fetchall()[0][0]
    finally:
        con.close()


def test_an_older_catalog_with_primary_keys_and_texts_is_rebuilt_keyless_on_the_next_writer_open(tmp_path):
    old = duckdb.connect(str(tmp_path / "catalog.duckdb"))
    old.execute(KEYED.replace("title VARCHAR,", "title VARCHAR, text VARCHAR,", 1))
    assert len(_keys(old)) == 2
    old.execute("INSERT INTO documents (doc_id, version, title, text, acl, content_hash, status) VALUES "
                "('a', '1', 'A', 'old text', ['g'], 'h1', 'superseded'), ('a', '2', 'A', 'new', ['g'], 'h2', 'current')")
    old.execute("INSERT INTO units (unit_id, unit_version, content_hash, status) VALUES ('u', 1, 'x', 'current')")
    old.close()
    cat = Catalog(tmp_path / "catalog.duckdb")
    assert _keys(cat.con) == []
    assert cat.document_texts([("a", "1"), ("a", "2")]) == {("a", "1"): ("A", "old text"), ("a", "2"): ("A", "new")}
    assert cat.rows("SELECT acl FROM documents WHERE version = '2'") == [(["g"],)]
    assert cat.current_units() == {"u": (1, "x")}
    cat.publish_snapshot(cat.begin_publish([]))
    cat.close()
    reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
    assert reader.rows("SELECT text FROM documents WHERE status = 'current'") == [("new",)]
    reader.close()


def _mostly_free(path):
    """A writer catalog whose blocks were mostly freed (a large table written, checkpointed, then dropped)."""
    cat = Catalog(path)
    cat.insert_documents({"doc_id": ["d7"], "version": ["1"], "title": ["title 7"], "text": ["t"],
                          "content_hash": ["h7"], "status": ["current"]})
    cat.con.execute("CREATE TABLE scratch AS SELECT range AS n, 'row ' || range AS s FROM range(300000)")
    cat.con.execute("CHECKPOINT")
    cat.con.execute("DROP TABLE scratch")
    cat.con.execute("CHECKPOINT")
    return cat


def test_a_mostly_free_catalog_is_compacted_when_its_writer_closes(tmp_path):
    path = tmp_path / "catalog.duckdb"
    cat = _mostly_free(path)
    before = path.stat().st_size
    assert cat.rows("SELECT free_blocks FROM pragma_database_size()")[0][0] > 0
    cat.close()
    assert path.stat().st_size < before / 2
    assert _free_blocks(path) == 0
    assert not any(p.name.startswith(".catalog") for p in tmp_path.iterdir())
    cat = Catalog(path)
    assert cat.document_texts([("d7", "1")]) == {("d7", "1"): ("title 7", "t")}
    cat.close()


def test_no_compaction_while_another_connection_has_the_file_or_an_error_is_on_its_way_out(tmp_path):
    path = tmp_path / "catalog.duckdb"
    cat = _mostly_free(path)
    other = Catalog(path)  # a second writer connection of the process (e.g. an asset check's) still has the file
    cat.close()
    size = path.stat().st_size
    other.close()  # the last one: compacted
    assert path.stat().st_size < size / 2
    cat = _mostly_free(tmp_path / "second" / "catalog.duckdb")
    size = (tmp_path / "second" / "catalog.duckdb").stat().st_size
    assert cat.rows("SELECT free_blocks FROM pragma_database_size()")[0][0] > 0
    with pytest.raises(RuntimeError):
        try:
            raise RuntimeError("a step failed")
        finally:
            cat.close()
    assert (tmp_path / "second" / "catalog.duckdb").stat().st_size == size


def test_a_run_holding_the_workspace_lock_still_compacts_when_its_step_closes_the_catalog(tmp_path):
    path = tmp_path / "catalog.duckdb"
    with WriterLock(tmp_path):  # as `rag ingest` and a Dagster run hold it across their steps
        cat = _mostly_free(path)
        size = path.stat().st_size
        cat.close()
        assert path.stat().st_size < size / 2


def _add_documents(cat: Catalog, start: int, n: int) -> None:
    ids = [f"doc-{i:06d}" for i in range(start, start + n)]
    cat.insert_documents({"doc_id": ids, "version": ["1"] * n, "title": [f"title of {d}" for d in ids],
                          "text": [f"text {d}" for d in ids], "content_hash": [f"hash-{d}" for d in ids],
                          "status": ["current"] * n})
    cat.con.execute("CHECKPOINT")


def _blocks(path) -> int:
    return _free_blocks(path, "total_blocks")


@pytest.mark.slow   # 60,000 documents written in 16 checkpoints: ~8 s
def test_a_catalog_grown_by_a_fifth_since_its_last_copy_is_copied_at_close_and_one_grown_less_is_not(tmp_path):
    """Checkpoints leave used blocks partly empty, which no free-block count shows; the copy packs them."""
    path = tmp_path / "catalog.duckdb"
    record = tmp_path / "catalog.duckdb.compacted"
    cat = Catalog(path)
    for start in range(0, 40_000, 4_000):   # written piecemeal, as runs write it
        _add_documents(cat, start, 4_000)
    grown_to = cat.rows("SELECT total_blocks FROM pragma_database_size()")[0][0]
    assert grown_to >= MIN_BLOCKS and not record.exists()
    cat.close()                             # never copied before: copied now
    assert int(record.read_text()) == _blocks(path) < grown_to
    copied = path.stat().st_ino

    cat = Catalog(path)
    _add_documents(cat, 40_000, 400)        # +1%: kept as it is
    cat.close()
    assert path.stat().st_ino == copied and int(record.read_text()) < _blocks(path)

    cat = Catalog(path)
    for start in range(50_000, 60_000, 2_000):
        _add_documents(cat, start, 2_000)
        cat.con.execute("UPDATE documents SET status = 'superseded' WHERE doc_id < ?", [f"doc-{start - 45_000:06d}"])
        cat.con.execute("CHECKPOINT")
    assert cat.rows("SELECT total_blocks FROM pragma_database_size()")[0][0] >= (1 + GROWTH_SHARE) * int(
        record.read_text())
    cat.close()
    assert path.stat().st_ino != copied and int(record.read_text()) == _blocks(path)
    cat = Catalog(path)
    assert cat.rows("SELECT count(*), count(*) FILTER (status = 'superseded') FROM documents") == [(50_400, 13_000)]
    cat.close()
