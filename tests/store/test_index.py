"""The LanceDB sub-chunk table: rows per unit version, a vector cache that survives deletion, ACL pre-filter."""
import numpy as np
import pytest

from rag.store.index import SubchunkIndex, SubchunkRow


def rows_for(unit: str, version: int, acl: tuple[str, ...], n: int) -> list[SubchunkRow]:
    key = f"{unit}@{version}"
    return [SubchunkRow(f"{key}:0:{i}", key, unit, version, f"{unit}-doc", "1", 0, acl, "c", i * 10, i * 10 + 9, 5,
                        f"hash-{unit}-{i}") for i in range(n)]


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_removed_units_leave_their_vectors_in_the_cache(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    vecs = unit_vectors(3, 0)
    index.add(rows_for("u-a", 1, ("g1",), 3), vecs)
    assert index.unit_keys() == {"u-a@1"}
    assert np.allclose(index.cached_vectors(["hash-u-a-1"])["hash-u-a-1"], vecs[1], atol=1e-3)  # stored as float16

    assert index.remove_units({"u-a@1"}) == 3
    assert index.count() == 0 and index.unit_keys() == set()
    cached = index.cached_vectors(["hash-u-a-0", "hash-u-a-2", "never-seen"])
    assert set(cached) == {"hash-u-a-0", "hash-u-a-2"}
    assert np.allclose(cached["hash-u-a-2"], vecs[2], atol=1e-3)


def test_acl_prefilter_returns_only_rows_the_groups_may_read(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    index.add(rows_for("u-open", 1, ("everyone",), 4) + rows_for("u-secret", 1, ("security-team",), 4),
              unit_vectors(8, 1))
    index.ensure_indexes()
    assert "acl_idx" in {i.name for i in index.table.list_indices()}
    hits = (index.table.search(unit_vectors(1, 2)[0]).where("array_has_any(acl, ['everyone', 'support'])",
                                                            prefilter=True).limit(20).to_list())
    assert len(hits) == 4
    assert {h["unit_id"] for h in hits} == {"u-open"}


def test_a_vector_still_held_by_a_row_is_not_cached_again_and_is_cached_once_its_last_row_goes(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    vecs = unit_vectors(3, 3)
    index.add(rows_for("u-a", 1, ("g1",), 3), vecs)
    successor = rows_for("u-a", 2, ("g1",), 2)  # the unit re-published with its first two texts unchanged
    index.add(successor, vecs[:2])

    assert index.remove_units({"u-a@1"}) == 3
    assert index.cache.count_rows() == 1  # only the text that left the table
    assert np.allclose(index.cached_vectors(["hash-u-a-2"])["hash-u-a-2"], vecs[2], atol=1e-3)

    assert index.remove_units({"u-a@2"}) == 2
    cached = index.cached_vectors(["hash-u-a-0", "hash-u-a-1", "hash-u-a-2"])
    assert set(cached) == {"hash-u-a-0", "hash-u-a-1", "hash-u-a-2"} and index.cache.count_rows() == 3
    assert np.allclose(cached["hash-u-a-1"], vecs[1], atol=1e-3)



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
