"""The LanceDB sub-chunk index: rows per document version and member range, one int8 vector per text kept apart and
past the rows that held it for the retention; an older table with vectors in its rows moves them there once, and one
keyed by unit version is re-written keyed by document version."""
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rag.retrieval.vectors import load_state
from rag.store.index import CACHE_TABLE, SCHEMA, TABLE, SubchunkIndex, SubchunkRow, pairs_predicate


def rows_for(doc: str, version: str, acl: tuple[str, ...], n: int) -> list[SubchunkRow]:
    """n rows of one member (a whole document version); a text's hash names the document and its place only, so a
    new version with its texts unchanged holds the same texts."""
    return [SubchunkRow(doc, version, 0, 0, n * 10, acl, "c", i * 10, i * 10 + 9, 5, f"hash-{doc}-{i}")
            for i in range(n)]


def key_of(rows: list[SubchunkRow]) -> tuple:
    r = rows[0]
    return (r.doc_id, r.doc_version, r.part, r.member_start, r.member_end, r.acl, r.collection)


def unit_keyed_table(rows: list[SubchunkRow], unit_key: str) -> dict[str, list]:
    """The columns of a table from before rows were keyed by document version (rows keyed by unit version)."""
    unit_id, version = unit_key.split("@")
    return {"unit_key": [unit_key] * len(rows), "unit_id": [unit_id] * len(rows),
            "unit_version": [int(version)] * len(rows),
            **{name: [list(r.acl) if name == "acl" else getattr(r, name) for r in rows]
               for name in ("doc_id", "doc_version", "part", "acl", "collection", "char_start", "char_end", "tokens",
                            "text_hash")}}


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def same_directions(a: np.ndarray, b: np.ndarray) -> bool:
    """Row by row, the same direction up to int8 rounding (a cosine is all any read computes from a vector)."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    cos = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return bool(np.all(cos > 0.9995))


def test_removed_members_leave_their_vectors_behind(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    vecs = unit_vectors(3, 0)
    rows = rows_for("u-a", "1", ("g1",), 3)
    index.add(rows, vecs)
    assert index.member_keys() == {key_of(rows)}
    assert same_directions(index.cached_vectors(["hash-u-a-1"])["hash-u-a-1"], vecs[1])

    assert index.remove_stale(set()) == (3, set())
    assert index.count() == 0 and index.member_keys() == set()
    cached = index.cached_vectors(["hash-u-a-0", "hash-u-a-2", "never-seen"])
    assert set(cached) == {"hash-u-a-0", "hash-u-a-2"}
    assert same_directions(cached["hash-u-a-2"], vecs[2])


def test_each_text_keeps_one_int8_vector_and_a_new_document_version_writes_its_rows_only(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    vecs = unit_vectors(4, 1)
    index.add(rows_for("u-a", "1", ("g1",), 4), vecs)
    assert "vector" not in index.table.schema.names
    assert index.vectors.schema.field("vector").type == pa.list_(pa.int8(), 384)
    stored = index.rows_of_docs(["u-a"], [])[1]
    assert np.array_equal(stored, np.rint(vecs * 127 / np.abs(vecs).max(axis=1, keepdims=True)))

    successor = rows_for("u-a", "2", ("g1",), 4)  # a new version, its texts unchanged
    index.add(successor, np.stack([index.cached_vectors([r.text_hash])[r.text_hash] for r in successor]))
    assert index.remove_stale({key_of(successor)}) == (4, set())
    assert index.vectors.count_rows() == 4 and index.count() == 4
    assert np.array_equal(index.rows_of_docs(["u-a"], [])[1], stored)  # a re-quantised int8 vector is the same
    assert index.departed.count_rows() == 0                             # every text is still held


def test_rows_of_a_document_version_whose_member_changed_in_place_go_and_its_live_members_come_back(tmp_path):
    """A unit's ACL changed without a new document version: every row of that version goes, and its live member is
    named for re-writing; rows of other documents stay untouched."""
    index = SubchunkIndex(tmp_path / "lance")
    old, other = rows_for("d", "1", ("g1",), 3), rows_for("e", "1", ("g1",), 2)
    index.add(old + other, unit_vectors(5, 10))
    new = rows_for("d", "1", ("g2",), 3)
    index.add(new, unit_vectors(3, 11))
    assert index.remove_stale({key_of(new), key_of(other)}) == (6, {key_of(new)})
    assert index.member_keys() == {key_of(other)}


def test_an_older_table_moves_its_vectors_and_its_cache_apart_once_and_its_old_versions_still_read(tmp_path):
    import lancedb  # here, not at module level: `import lancedb` costs each xdist worker that collects this ~2 CPU s
    from lancedb.index import LabelList

    db = lancedb.connect(str(tmp_path / "lance"))
    rows, vecs = rows_for("u-a", "1", ("g1",), 4), unit_vectors(5, 2)
    cols = unit_keyed_table(rows, "u-a@1")
    table = db.create_table(TABLE, pa.table({**cols, "vector": pa.FixedSizeListArray.from_arrays(
        pa.array(vecs[:4].astype(np.float16).ravel()), 384)}).replace_schema_metadata({"subchunk_recipe": "r-kept"}))
    table.create_index("acl", config=LabelList(), name="acl_idx")
    db.create_table(CACHE_TABLE, pa.table({"text_hash": ["hash-gone"], "vector": pa.FixedSizeListArray.from_arrays(
        pa.array(vecs[4].astype(np.float16)), 384), "cached_at": pa.array([datetime(2026, 1, 1)], pa.timestamp("us"))}))
    before = table.version

    index = SubchunkIndex(tmp_path / "lance")
    assert index.in_rows and index.dimension == 384
    assert index.separate_vectors() == 5 and index.separate_vectors() == 0
    assert not index.in_rows and CACHE_TABLE not in db.list_tables().tables and index.recipe == "r-kept"
    assert same_directions(index.rows_of_docs([], ["u-a@1"])[1], vecs[:4])
    assert same_directions(index.cached_vectors(["hash-gone"])["hash-gone"], vecs[4])
    assert index.departed.to_arrow().column("text_hash").to_pylist() == ["hash-gone"]
    keyed = index.version

    assert index.unit_keyed and index.rekey() == 4 and index.rekey() == 0   # re-keyed once, by the next publish
    assert not index.unit_keyed and index.count() == 0 and index.recipe == "r-kept"
    index.add(rows, np.stack([index.cached_vectors([r.text_hash])[r.text_hash] for r in rows]))  # nothing embedded
    index.ensure_indexes()
    assert {i.name for i in index.table.list_indices()} == {"doc_id_idx"}

    past = SubchunkIndex.reader(index.uri, before)   # an as-of read of the version before: vectors in its rows
    assert past.in_rows and np.allclose(load_state(past).matrix.astype(np.float32), vecs[:4], atol=2e-3)
    assert list(load_state(SubchunkIndex.reader(index.uri, keyed)).unit_keys) == ["u-a@1"] * 4  # named by its rows


def test_a_vector_still_held_by_a_row_is_not_marked_as_left_until_its_last_row_goes(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    vecs = unit_vectors(3, 3)
    index.add(rows_for("u-a", "1", ("g1",), 3), vecs)
    successor = rows_for("u-a", "2", ("g1",), 2)  # a new version with its first two texts unchanged
    index.add(successor, vecs[:2])

    assert index.remove_stale({key_of(successor)}) == (3, set())
    assert index.departed.to_arrow().column("text_hash").to_pylist() == ["hash-u-a-2"]
    assert index.remove_stale(set()) == (2, set())
    assert sorted(index.departed.to_arrow().column("text_hash").to_pylist()) == ["hash-u-a-0", "hash-u-a-1",
                                                                                  "hash-u-a-2"]
    cached = index.cached_vectors(["hash-u-a-0", "hash-u-a-1", "hash-u-a-2"])
    assert set(cached) == {"hash-u-a-0", "hash-u-a-1", "hash-u-a-2"} and index.vectors.count_rows() == 3
    assert same_directions(cached["hash-u-a-1"], vecs[1])


def test_mostly_deleted_fragments_are_rewritten_and_older_versions_stay_readable_for_the_retention(tmp_path,
                                                                                                   monkeypatch):
    index = SubchunkIndex(tmp_path / "lance")
    index.add(rows_for("u-a", "1", ("g1",), 10), unit_vectors(10, 4))
    index.add(rows_for("u-b", "1", ("g1",), 10), unit_vectors(10, 5))
    before = index.version
    index.table.delete("doc_id = 'u-b' AND char_start < 60")  # 6 of the fragment's 10 rows
    index.table.delete("doc_id = 'u-a' AND char_start < 30")  # 3 of 10: not worth a rewrite yet
    index.maintain()
    fragments = sorted((f.count_rows(), f.physical_rows) for f in index.table.to_lance().get_fragments())
    assert fragments == [(4, 4), (7, 10)]
    assert SubchunkIndex.reader(index.uri, before).count() == 20  # an as-of read within the retention
    assert sorted(index.rows_of_docs(["u-b"], [])[0].column("char_start").to_pylist()) == [60, 70, 80, 90]

    monkeypatch.setenv("RAG_INDEX_RETENTION_DAYS", "0")
    index.maintain()
    with pytest.raises(LookupError):
        SubchunkIndex.reader(index.uri, before)
    assert index.count() == 11


def test_a_text_that_left_keeps_its_vector_for_the_retention_only_unless_it_came_back(tmp_path, monkeypatch):
    index = SubchunkIndex(tmp_path / "lance")
    index.add(rows_for("u-a", "1", ("g1",), 3), unit_vectors(3, 6))
    index.remove_stale(set())
    back = rows_for("u-b", "1", ("g1",), 1)[0]
    index.add([SubchunkRow(**{**back.__dict__, "text_hash": "hash-u-a-1"})], unit_vectors(1, 7))  # came back
    index.maintain()
    assert set(index.cached_vectors(["hash-u-a-0", "hash-u-a-2"])) == {"hash-u-a-0", "hash-u-a-2"}
    monkeypatch.setenv("RAG_INDEX_RETENTION_DAYS", "0")
    index.maintain()
    assert set(index.cached_vectors(["hash-u-a-0", "hash-u-a-1", "hash-u-a-2"])) == {"hash-u-a-1"}
    assert index.vectors.count_rows() == 1 and index.departed.count_rows() == 0


def test_with_the_published_versions_named_every_other_version_goes_and_those_still_read(tmp_path):
    """As-of reads only open versions publishes named; the ones between (rows added, deleted, compacted) go."""
    index = SubchunkIndex(tmp_path / "lance")
    index.add(rows_for("u-a", "1", ("g1",), 10), unit_vectors(10, 6))
    index.ensure_indexes()
    first = index.version
    successor = rows_for("u-a", "2", ("g1",), 10)
    index.add(successor, unit_vectors(10, 7))
    between = index.version
    index.remove_stale({key_of(successor)})
    index.ensure_indexes({first})
    assert {v["version"] for v in index.table.to_lance().versions()} == {first, index.version}
    assert SubchunkIndex.reader(index.uri, first).count() == 10
    with pytest.raises(LookupError):
        SubchunkIndex.reader(index.uri, between)
    assert index.member_keys() == {key_of(successor)}


def test_an_older_table_loses_its_chunk_ids_and_its_old_versions_keep_them(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    rows = rows_for("u-a", "1", ("g1",), 3)
    index.add(rows, unit_vectors(3, 8))
    old = index.table.to_lance().to_table()
    old = old.add_column(0, "chunk_id", pa.array([f"u-a:0:{i}" for i in range(3)]))
    index.table = index.db.create_table(TABLE, old.replace_schema_metadata(index.table.schema.metadata),
                                        mode="overwrite")
    before = index.version
    assert index.drop_unused_columns() == ["chunk_id"]
    assert "chunk_id" not in index.table.schema.names and index.drop_unused_columns() == []
    more = rows_for("u-b", "1", ("g1",), 2)
    index.add(more, unit_vectors(2, 9))
    assert index.member_keys() == {key_of(rows), key_of(more)}
    assert SubchunkIndex.reader(index.uri, before).table.to_lance().to_table(columns=["chunk_id"]).num_rows == 3


def test_a_delete_of_many_documents_keeps_its_long_predicate_out_of_the_versions_it_leaves(tmp_path):
    """Lance would copy a delete's predicate into the new version's manifest and transaction file, kept with the
    version for as-of reads; a publish's delete names every replaced document version."""
    index = SubchunkIndex(tmp_path / "lance")
    docs = [f"doc-{i:04d}-{'x' * 20}" for i in range(400)]
    for part in (docs[:200], docs[200:]):   # two fragments: one loses rows, one loses all of them
        index.add([r for d in part for r in rows_for(d, "1", ("g1",), 2)], unit_vectors(2 * len(part), 9))
    index.ensure_indexes()
    before = index.version
    folder = tmp_path / "lance" / f"{TABLE}.lance"
    listed = lambda sub: {p.name: p.stat().st_size for p in (folder / sub).iterdir()}  # noqa: E731
    kept = listed("_versions"), listed("_transactions")
    gone = docs[150:]
    removed, _ = index.remove_stale({key_of(rows_for(d, "1", ("g1",), 2)) for d in docs[:150]})
    assert removed == 2 * len(gone) and index.count() == 300
    assert index.member_keys() == {key_of(rows_for(d, "1", ("g1",), 2)) for d in docs[:150]}
    assert index.rows_of_docs([docs[0], docs[300]], [])[0].num_rows == 2   # the doc_id B-tree still serves
    assert SubchunkIndex.reader(index.uri, before).count() == 800
    predicate = pairs_predicate({(d, "1") for d in gone})
    for sub, old in zip(("_versions", "_transactions"), kept):
        added = {n: s for n, s in listed(sub).items() if n not in old}
        assert len(added) == 1 and max(added.values()) < len(predicate) / 4


def test_a_publish_of_a_thousand_rows_stores_its_ids_and_hashes_compressed_and_a_table_made_before_still_takes_them(
        tmp_path):
    """Lance leaves a short fragment's strings uncompressed unless the table's schema asks for zstd; a table made
    before keeps its encoding and reads and appends as before."""
    import hashlib

    import lance

    def publish(n0: int) -> list[SubchunkRow]:
        ids = [hashlib.md5(str(i).encode()).hexdigest() for i in range(n0, n0 + 1000)]
        return [SubchunkRow(f"doc:{h[:16]}", "1", 0, 0, 99, ("g1",), "c", 0, 99, 20, h[::-1]) for h in ids]

    def last_fragment_bytes(index: SubchunkIndex) -> int:
        dataset = index.table.to_lance()
        return sum((Path(dataset.uri) / "data" / f.path).stat().st_size
                   for f in dataset.get_fragments()[-1].data_files())

    new = SubchunkIndex(tmp_path / "new")
    old_table = pa.schema([f.remove_metadata() for f in SCHEMA], metadata=SCHEMA.metadata)
    lance.write_dataset(old_table.empty_table(), str(tmp_path / "old" / f"{TABLE}.lance"), schema=old_table)
    old = SubchunkIndex(tmp_path / "old")
    for index in (new, old):
        for n0 in (0, 1000):
            index.add(publish(n0), unit_vectors(1000, n0))
    assert last_fragment_bytes(new) < 0.7 * last_fragment_bytes(old)
    assert new.member_keys() == old.member_keys() and len(new.member_keys()) == 2000
    assert new.rows_of_docs([publish(1000)[5].doc_id], [])[0].num_rows == 1
