"""The storage figure: every part a workspace keeps on disk, over the titles and texts it serves."""
from __future__ import annotations

from rag.store.catalog import Catalog
from rag.store.storage import measure


def test_the_ratio_counts_catalog_read_state_and_index_over_titles_and_texts(tmp_path):
    cat = Catalog(tmp_path / "catalog.duckdb")
    cat.insert_documents({"doc_id": ["a", "a"], "version": ["1", "0"], "title": ["Ünïcode", "Old"],
                          "text": ["text of a", "old text"], "content_hash": ["h1", "h0"],
                          "status": ["current", "superseded"]})
    cat.publish_snapshot(cat.begin_publish([]))
    assert cat.raw_text_bytes() == len("Ünïcode".encode()) + len("text of a")  # current versions, UTF-8 bytes
    (tmp_path / "lancedb").mkdir()
    (tmp_path / "lancedb" / "vectors.bin").write_bytes(b"\0" * 1000)
    stored = measure(tmp_path / "catalog.duckdb", tmp_path / "lancedb", cat.raw_text_bytes())
    files = {p: p.stat().st_size for p in tmp_path.rglob("*") if p.is_file() and p.name != "writer.lock"}
    assert stored.total() == sum(files.values())
    assert stored.read_state_bytes == sum(n for p, n in files.items() if "snapshots" in p.parts) > 0
    assert stored.total(with_index=False) == stored.total() - 1000
    assert stored.ratio() == round(stored.total() / cat.raw_text_bytes(), 2)
    cat.close()


def test_a_new_catalog_uses_small_blocks_and_an_older_file_keeps_its_own(tmp_path):
    import duckdb

    cat = Catalog(tmp_path / "new" / "catalog.duckdb")
    (new_block,), = cat.rows("SELECT block_size FROM pragma_database_size()")
    cat.close()
    older = tmp_path / "old" / "catalog.duckdb"
    older.parent.mkdir()
    duckdb.connect(str(older)).close()  # DuckDB's default block size, as catalogs made before were
    cat = Catalog(older)
    (old_block,), = cat.rows("SELECT block_size FROM pragma_database_size()")
    cat.insert_documents({"doc_id": ["a"], "version": ["1"], "text": ["x"], "content_hash": ["h"], "status": ["current"]})
    assert cat.raw_text_bytes() == 1
    cat.close()
    assert (new_block, old_block) == (16384, 262144)
