"""The LanceDB sub-chunk table: rows per unit version, int8 vectors at rest, a vector cache that survives deletion."""
import numpy as np
import pyarrow as pa
import pytest
from lancedb.index import LabelList

from rag.retrieval.vectors import load_state
from rag.store.index import CACHE_TABLE, TABLE, SubchunkIndex, SubchunkRow, cache_schema, schema


def rows_for(unit: str, version: int, acl: tuple[str, ...], n: int) -> list[SubchunkRow]:
    key = f"{unit}@{version}"
    return [SubchunkRow(f"{key}:0:{i}", key, unit, version, f"{unit}-doc", "1", 0, acl, "c", i * 10, i * 10 + 9, 5,
                        f"hash-{unit}-{i}") for i in range(n)]


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def same_directions(a: np.ndarray, b: np.ndarray) -> bool:
    """Row by row, the same direction up to int8 rounding (a cosine is all any read computes from a vector)."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    cos = (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return bool(np.all(cos > 0.9995))


def test_removed_units_leave_their_vectors_in_the_cache(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    vecs = unit_vectors(3, 0)
    index.add(rows_for("u-a", 1, ("g1",), 3), vecs)
    assert index.unit_keys() == {"u-a@1"}
    assert same_directions(index.cached_vectors(["hash-u-a-1"])["hash-u-a-1"], vecs[1])

    assert index.remove_units({"u-a@1"}) == 3
    assert index.count() == 0 and index.unit_keys() == set()
    cached = index.cached_vectors(["hash-u-a-0", "hash-u-a-2", "never-seen"])
    assert set(cached) == {"hash-u-a-0", "hash-u-a-2"}
    assert same_directions(cached["hash-u-a-2"], vecs[2])


def test_a_new_table_keeps_int8_vectors_whose_largest_component_is_127_and_a_cached_vector_round_trips(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    vecs = unit_vectors(4, 1)
    index.add(rows_for("u-a", 1, ("g1",), 4), vecs)
    assert index.table.schema.field("vector").type == pa.list_(pa.int8(), 384)
    assert index.cache.schema.field("vector").type == pa.list_(pa.int8(), 384)
    stored = index.rows_of_units(["u-a@1"])[1]
    assert np.all(np.abs(stored).max(axis=1) == 127) and same_directions(stored, vecs)
    assert np.array_equal(stored, np.rint(vecs * 127 / np.abs(vecs).max(axis=1, keepdims=True)))

    index.remove_units({"u-a@1"})               # to the cache, then back into the table as a re-published unit's
    index.add(rows_for("u-a", 2, ("g1",), 4), np.stack([index.cached_vectors([f"hash-u-a-{i}"])[f"hash-u-a-{i}"]
                                                        for i in range(4)]))
    assert np.array_equal(index.rows_of_units(["u-a@2"])[1], stored)


def test_a_float16_table_stays_float16_is_served_alike_and_loses_the_indexes_nothing_reads(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    old_type = pa.list_(pa.float16(), 384)
    index.table = index.db.create_table(TABLE, schema=pa.schema(
        [f if f.name != "vector" else pa.field("vector", old_type) for f in schema()]), mode="overwrite")
    index.cache = index.db.create_table(CACHE_TABLE, schema=pa.schema(
        [f if f.name != "vector" else pa.field("vector", old_type) for f in cache_schema()]), mode="overwrite")
    vecs = unit_vectors(8, 2)
    index.add(rows_for("u-a", 1, ("g1",), 4) + rows_for("u-b", 1, ("g2",), 4), vecs)
    index.table.create_index("acl", config=LabelList(), name="acl_idx")
    index.ensure_indexes()
    assert {i.name for i in index.table.list_indices()} == {"unit_key_idx"}
    assert index.table.schema.field("vector").type == old_type
    assert np.allclose(index.rows_of_units(["u-a@1"])[1], vecs[:4], atol=1e-3)
    state = load_state(index)
    assert np.allclose(state.matrix.astype(np.float32), vecs, atol=2e-3)
    index.remove_units({"u-b@1"})
    assert same_directions(index.cached_vectors(["hash-u-b-3"])["hash-u-b-3"], vecs[7])


def test_a_vector_still_held_by_a_row_is_not_cached_again_and_is_cached_once_its_last_row_goes(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    vecs = unit_vectors(3, 3)
    index.add(rows_for("u-a", 1, ("g1",), 3), vecs)
    successor = rows_for("u-a", 2, ("g1",), 2)  # the unit re-published with its first two texts unchanged
    index.add(successor, vecs[:2])

    assert index.remove_units({"u-a@1"}) == 3
    assert index.cache.count_rows() == 1  # only the text that left the table
    assert same_directions(index.cached_vectors(["hash-u-a-2"])["hash-u-a-2"], vecs[2])

    assert index.remove_units({"u-a@2"}) == 2
    cached = index.cached_vectors(["hash-u-a-0", "hash-u-a-1", "hash-u-a-2"])
    assert set(cached) == {"hash-u-a-0", "hash-u-a-1", "hash-u-a-2"} and index.cache.count_rows() == 3
    assert same_directions(cached["hash-u-a-1"], vecs[1])



def test_mostly_deleted_fragments_are_rewritten_and_older_versions_stay_readable_for_the_retention(tmp_path,
                                                                                                   monkeypatch):
    index = SubchunkIndex(tmp_path / "lance")
    index.add(rows_for("u-a", 1, ("g1",), 10), unit_vectors(10, 4))
    index.add(rows_for("u-b", 1, ("g1",), 10), unit_vectors(10, 5))
    before = index.version
    index.table.delete("unit_key = 'u-b@1' AND char_start < 60")  # 6 of the fragment's 10 rows
    index.table.delete("unit_key = 'u-a@1' AND char_start < 30")  # 3 of 10: not worth a rewrite yet
    index.maintain()
    fragments = sorted((f.count_rows(), f.physical_rows) for f in index.table.to_lance().get_fragments())
    assert fragments == [(4, 4), (7, 10)]
    assert SubchunkIndex.reader(index.uri, before).count() == 20  # an as-of read within the retention
    assert sorted(index.rows_of_units(["u-b@1"])[0].column("char_start").to_pylist()) == [60, 70, 80, 90]

    monkeypatch.setenv("RAG_INDEX_RETENTION_DAYS", "0")
    index.maintain()
    with pytest.raises(LookupError):
        SubchunkIndex.reader(index.uri, before)
    assert index.count() == 11


def test_a_removed_text_keeps_its_cached_vector_for_the_retention_only(tmp_path, monkeypatch):
    index = SubchunkIndex(tmp_path / "lance")
    index.add(rows_for("u-a", 1, ("g1",), 3), unit_vectors(3, 6))
    index.remove_units({"u-a@1"})
    index.maintain()
    assert set(index.cached_vectors(["hash-u-a-0", "hash-u-a-2"])) == {"hash-u-a-0", "hash-u-a-2"}
    monkeypatch.setenv("RAG_INDEX_RETENTION_DAYS", "0")
    index.maintain()
    assert index.cached_vectors(["hash-u-a-0", "hash-u-a-2"]) == {} and index.cache.count_rows() == 0
