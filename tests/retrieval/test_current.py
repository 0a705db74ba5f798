"""A snapshot's current part built from the catalog's Arrow columns holds exactly the arrays the per-member rows
gave: the same members, documents, units, ACL numbering and string tables."""
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag.retrieval.current import current_arrays, current_arrays_of, current_state, published_state
from rag.retrieval.members import acl_numbering, first_seen_rows
from rag.retrieval.strings import strings_of


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


def same_arrays(catalog) -> None:
    built = current_arrays_of(catalog.current_member_columns(), catalog.current_version_columns())
    reference = current_arrays(current_state(catalog))
    assert set(built.arrays) == set(reference.arrays) | {"doc_digests", "unit_digests"}  # a partition merge has none
    for name, array in reference.arrays.items():
        assert built.arrays[name].dtype == array.dtype and np.array_equal(built.arrays[name], array), name
    assert built.meta == reference.meta


def test_the_sample_publish_gives_the_arrays_of_its_member_rows(sample):
    catalog, _ = sample
    assert len(catalog.current_member_columns()) > 20 and len(catalog.current_version_columns()) > 20
    same_arrays(catalog)


def test_each_member_row_read_back_is_the_catalogs_with_its_documents_strings_and_acl(sample):
    catalog, _ = sample
    table = published_state(current_arrays_of(catalog.current_member_columns(),
                                              catalog.current_version_columns())).table
    assert [table.row(i) for i in range(len(table))] == catalog.current_members()
    first = [int(a) for i, a in enumerate(table.acl_ids) if a not in table.acl_ids[:i]]
    assert first == list(range(len(table.acl_sets)))  # member ACLs numbered in order of first appearance


def test_acl_numbers_of_a_string_column_are_those_of_its_strings(sample):
    catalog, _ = sample
    state = published_state(current_arrays_of(catalog.current_member_columns(), catalog.current_version_columns()))
    ids = [state.docs[0], "no-such-document", state.docs[len(state.docs) - 1], state.docs[0]]
    by_list, by_column = {}, {}
    assert state.acls.acl_codes(ids, by_list).tolist() == state.acls.acl_codes(strings_of(ids), by_column).tolist()
    assert by_list == by_column and state.acls.acl_codes(ids, by_list)[1] == -1


def test_the_documents_id_and_hash_pairs_are_the_catalogs(sample):
    catalog, _ = sample
    state = published_state(current_arrays_of(catalog.current_member_columns(), catalog.current_version_columns()))
    ids, hashes = state.doc_hashes
    assert [(i.decode(), h.decode()) for i, h in zip(ids.tolist(), hashes.tolist())] == catalog.current_hashes()[""]


def test_superseded_retired_and_regrouped_members_give_the_arrays_of_their_rows(sample):
    catalog, _ = sample
    (doc,), = catalog.rows("SELECT min(doc_id) FROM documents WHERE status = 'current'")
    (unit, version), = catalog.rows("SELECT unit_id, unit_version FROM units WHERE status = 'current' ORDER BY 1 DESC "
                                    "LIMIT 1")
    catalog.con.execute("BEGIN")
    try:
        catalog.con.execute("UPDATE documents SET status = 'superseded' WHERE doc_id = ?", [doc])
        catalog.con.execute("UPDATE units SET status = 'retired' WHERE unit_id = ? AND unit_version = ?",
                            [unit, version])
        # a document held by two units, the second ordered first by key: its unit is the lower key
        catalog.con.execute("INSERT INTO units SELECT '0-first' AS unit_id, * EXCLUDE (unit_id) FROM units "
                            "WHERE status = 'current' ORDER BY unit_id LIMIT 1")
        catalog.con.execute("INSERT INTO unit_members SELECT '0-first' AS unit_id, * EXCLUDE (unit_id) FROM "
                            "unit_members m WHERE (unit_id, unit_version) IN (SELECT (unit_id, unit_version) "
                            "FROM units WHERE status = 'current' AND unit_id <> '0-first' ORDER BY unit_id LIMIT 1)")
        same_arrays(catalog)
        found = current_arrays_of(catalog.current_member_columns(), catalog.current_version_columns())
    finally:
        catalog.con.execute("ROLLBACK")
    assert doc.encode() not in set(found.arrays["docs"].tolist())
    assert found.arrays["members.units"][0].startswith(b"0-first@")
    assert (found.arrays["units"] == 0).sum() >= 1  # the documents of the copied unit name the copy, the lower key

groups = st.lists(st.sampled_from(["a", "b", "support", "ops", "é中"]), max_size=3)


@given(st.lists(groups, max_size=40))
def test_acls_are_numbered_in_order_of_first_appearance(acls):
    ids, sets = acl_numbering(pa.chunked_array([pa.array(acls[:7], pa.list_(pa.string())),
                                                pa.array(acls[7:], pa.list_(pa.string()))]))
    expected: dict[tuple, int] = {}
    assert ids.tolist() == [expected.setdefault(tuple(a), len(expected)) for a in acls]
    assert sets == list(expected)


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(-1, 1)), max_size=60))
def test_distinct_rows_are_numbered_in_order_of_first_appearance(rows):
    expected: dict[tuple, int] = {}
    numbers = [expected.setdefault(r, len(expected)) for r in rows]
    assert first_seen_rows(np.array(rows, dtype=np.int64).reshape(-1, 3)).tolist() == numbers
