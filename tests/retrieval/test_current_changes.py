"""A snapshot's current part made from the last one's and the catalog's changes holds exactly the arrays a build from
scratch gives, over random histories of new documents, re-versions, deletions, restorations, in-place ACL and title
edits, and units retired or added."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.retrieval.current import current_arrays_of, published_state
from rag.retrieval.current_changes import next_current_arrays


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


def built(catalog):
    return current_arrays_of(catalog.current_member_columns(), catalog.current_version_columns())


def pick(catalog, sql: str, i: int):
    rows = catalog.rows(sql)
    return rows[i % len(rows)] if rows else None


CURRENT_DOCS = "SELECT doc_id, version FROM documents WHERE status = 'current' ORDER BY 1"
CURRENT_UNITS = "SELECT unit_id, unit_version FROM units WHERE status = 'current' ORDER BY 1, 2"


def apply(catalog, op: str, i: int, n: int) -> None:
    """One change to the catalog, as a publish (or a documents step before its index) makes it."""
    con = catalog.con
    if op in ("delete", "acl", "title", "reversion", "new") and (doc := pick(catalog, CURRENT_DOCS, i)):
        where = "doc_id = ? AND version = ?"
        if op == "delete":
            con.execute(f"UPDATE documents SET status = 'deleted' WHERE {where}", list(doc))
        elif op == "acl":
            con.execute(f"UPDATE documents SET acl = ? WHERE {where}", [[["support"], ["ops", "x"], []][i % 3], *doc])
        elif op == "new":  # a document of a longer id, in a unit of its own
            con.execute(f"INSERT INTO documents SELECT * REPLACE (doc_id || '~{n}' AS doc_id) FROM documents "
                        f"WHERE {where}", list(doc))
            con.execute(f"INSERT INTO units SELECT * REPLACE ('n-{n}' AS unit_id, 1 AS unit_version) FROM units "
                        "WHERE status = 'current' ORDER BY unit_id LIMIT 1")
            con.execute(f"INSERT INTO unit_members SELECT 'n-{n}', 1, 0, doc_id || '~{n}', doc_version, part, "
                        "char_start, char_end, tokens FROM unit_members WHERE doc_id = ? AND doc_version = ? LIMIT 1",
                        list(doc))
        elif op == "title":
            con.execute(f"UPDATE documents SET title = title || ' é' WHERE {where}", list(doc))
        else:
            con.execute(f"UPDATE documents SET status = 'superseded' WHERE {where}", list(doc))
            con.execute(f"INSERT INTO documents SELECT * REPLACE (version || '.{n}' AS version, 'current' AS status, "
                        f"content_hash || '{n}' AS content_hash) FROM documents WHERE {where}", list(doc))
            con.execute(f"INSERT INTO unit_members SELECT * REPLACE (doc_version || '.{n}' AS doc_version) FROM "
                        "unit_members WHERE doc_id = ? AND doc_version = ?", list(doc))
    elif op == "restore" and (doc := pick(catalog, "SELECT doc_id, max(version) FROM documents GROUP BY doc_id "
                                                   "HAVING count(*) FILTER (status = 'current') = 0 ORDER BY 1", i)):
        con.execute("UPDATE documents SET status = 'current' WHERE doc_id = ? AND version = ?", list(doc))
    elif op == "retire" and (unit := pick(catalog, CURRENT_UNITS, i)):
        con.execute("UPDATE units SET status = 'retired' WHERE unit_id = ? AND unit_version = ?", list(unit))
    elif op == "add" and (unit := pick(catalog, CURRENT_UNITS, i)):  # a new unit of a unit's members, first by key
        for table in ("units", "unit_members"):
            con.execute(f"INSERT INTO {table} SELECT * REPLACE ('0-{n}' AS unit_id) FROM {table} "
                        "WHERE unit_id = ? AND unit_version = ?", list(unit))


ops = st.tuples(st.sampled_from(["delete", "acl", "title", "reversion", "new", "restore", "retire", "add"]),
                st.integers(0, 60))


@given(st.lists(st.lists(ops, min_size=1, max_size=4), min_size=1, max_size=4))
@settings(max_examples=30, deadline=None)
def test_a_part_made_from_the_last_ones_is_the_one_built_from_scratch(sample, history):
    catalog, _ = sample
    catalog.con.execute("BEGIN")
    try:
        last, n = published_state(built(catalog)), 0
        for step in history:
            for op, i in step:
                n += 1
                apply(catalog, op, i, n)
            made, expected = next_current_arrays(last, catalog, max_share=float("inf")), built(catalog)
            assert made is not None and set(made.arrays) == set(expected.arrays)
            for name, array in expected.arrays.items():
                assert made[name].dtype == array.dtype and np.array_equal(made[name], array), name
            assert made.meta == expected.meta
            last = published_state(made)
    finally:
        catalog.con.execute("ROLLBACK")


def test_past_a_share_of_changed_documents_the_part_is_built_from_scratch(sample):
    catalog, _ = sample
    last = published_state(built(catalog))
    catalog.con.execute("BEGIN")
    try:
        apply(catalog, "delete", 0, 1)
        assert next_current_arrays(last, catalog) is not None
        catalog.con.execute("UPDATE documents SET title = title || ' x' WHERE status = 'current'")
        assert next_current_arrays(last, catalog) is None
    finally:
        catalog.con.execute("ROLLBACK")
