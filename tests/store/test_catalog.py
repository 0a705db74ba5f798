"""The DuckDB catalog: document statuses, quarantine, and the stage/commit life of units."""
from dataclasses import replace

import pytest

from rag.models.tokens import default_counter
from rag.sources.documents import Document, Rejected
from rag.store.catalog import Catalog
from rag.store.snapshot_files import read_pointer
from rag.store.source_log import sync_documents
from rag.units.long_units import plan_units

SRC = "/data/src"


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog(tmp_path / "c.duckdb")
    yield cat
    cat.close()


@pytest.fixture(scope="module")
def counter():
    return default_counter()


def doc(doc_id, version="1", text="Body.", links=(), acl=("support",)):
    return Document(doc_id=doc_id, title=doc_id, text=text, version=version, acl=acl, links=links,
                    collection="ops", source=SRC, source_path=f"{SRC}/{doc_id}.{version}.md")


def sync(catalog, docs, rejected=()):
    pid = catalog.begin_publish([SRC])
    return pid, sync_documents(catalog, pid, list(docs), list(rejected), [SRC])


def statuses(catalog):
    return dict(((d, v), s) for d, v, s in catalog.rows("SELECT doc_id, version, status FROM documents"))


def unit_statuses(catalog):
    return dict(((u, v), s) for u, v, s in catalog.rows("SELECT unit_id, unit_version, status FROM units"))


def publish_units(catalog, docs, counter):
    pid, _ = sync(catalog, docs)
    changes = catalog.stage_units(pid, plan_units(docs, counter))
    catalog.commit_units(pid, lance_version=pid, embedded=0)
    return changes


def test_documents_move_through_current_superseded_and_deleted(catalog):
    old, gone = doc("a", "2025", "Old."), doc("b")
    sync(catalog, [old, gone])
    _, changes = sync(catalog, [old, doc("a", "2026", "New.")])
    assert statuses(catalog) == {("a", "2025"): "superseded", ("a", "2026"): "current", ("b", "1"): "deleted"}
    assert (changes.new, changes.superseded, changes.deleted, changes.current) == (
        [("a", "2026")], [("a", "2025")], [("b", "1")], 1)


def test_current_documents_round_trip_through_the_file(tmp_path):
    d = doc("a", links=("b",), acl=("partners", "support"))
    first = Catalog(tmp_path / "c.duckdb")
    sync(first, [d])
    first.close()
    reopened = Catalog(tmp_path / "c.duckdb")
    assert reopened.current_documents() == [d]
    reopened.close()


def test_two_versions_in_one_sync_leave_the_older_superseded(catalog):
    sync(catalog, [doc("a", "2025", "Old."), doc("a", "2026", "New.")])
    assert statuses(catalog) == {("a", "2025"): "superseded", ("a", "2026"): "current"}


def test_rejected_inputs_are_quarantined_with_severity_and_reason(catalog):
    sync(catalog, [doc("a")])
    pid, changes = sync(catalog, [doc("a", text="Edited in place.")],
                        [Rejected(f"{SRC}/empty.md", "empty file")])
    assert sorted(catalog.quarantine(pid)) == [
        ("rejected", f"{SRC}/a.1.md", "a",
         "text of 'a' version 1 changed but the version label did not; give the new text a newer version"),
        ("rejected", f"{SRC}/empty.md", None, "empty file"),
    ]
    assert len(changes.rejected) == 2
    assert statuses(catalog) == {("a", "1"): "current"}


def test_quarantine_is_kept_per_publish(catalog):
    first, _ = sync(catalog, [], [Rejected(f"{SRC}/one.md", "empty file")])
    second, _ = sync(catalog, [], [Rejected(f"{SRC}/two.md", "binary file (contains NUL bytes)")])
    assert [row[1] for row in catalog.quarantine(first)] == [f"{SRC}/one.md"]
    assert [row[1] for row in catalog.quarantine(second)] == [f"{SRC}/two.md"]
    assert len(catalog.quarantine()) == 2


def test_publish_log_counts_document_changes(catalog):
    sync(catalog, [doc("a", "2025", "Old."), doc("b")])
    pid, _ = sync(catalog, [doc("a", "2025", "Old."), doc("a", "2026", "New.")])
    assert catalog.rows("SELECT documents_new, documents_superseded, documents_deleted, status FROM publish_log "
                        "WHERE publish_id = ?", [pid]) == [(1, 1, 1, "running")]


def test_first_publish_makes_every_unit_current_at_version_one(catalog, counter):
    docs = [doc("a", links=("b",)), doc("b"), doc("c")]
    changes = publish_units(catalog, docs, counter)
    assert len(changes.published) == 2 and changes.retired == [] and changes.unchanged == 0
    assert set(unit_statuses(catalog).values()) == {"current"}
    assert {v for v, _ in catalog.current_units().values()} == {1}


def test_changed_unit_gets_the_next_version_and_unchanged_unit_keeps_its_version(catalog, counter):
    docs = [doc("a", links=("b",)), doc("b"), doc("c", "2025", "Old.")]
    publish_units(catalog, docs, counter)
    before = catalog.current_units()
    changes = publish_units(catalog, docs[:2] + [doc("c", "2026", "New.")], counter)
    after = catalog.current_units()
    [(changed_id, version)] = changes.published
    assert version == 2
    assert changes.retired == [(changed_id, 1)] and changes.unchanged == 1
    assert after[changed_id][0] == 2 and after[changed_id][1] != before[changed_id][1]
    assert {u: v for u, v in after.items() if u != changed_id} == {u: v for u, v in before.items() if u != changed_id}
    assert unit_statuses(catalog)[(changed_id, 1)] == "retired"


def test_unit_no_longer_planned_is_retired_at_commit(catalog, counter):
    docs = [doc("a"), doc("b")]
    publish_units(catalog, docs, counter)
    [gone_id] = [u.unit_id for u in plan_units([docs[1]], counter).units]
    changes = publish_units(catalog, docs[:1], counter)
    assert changes.retired == [(gone_id, 1)]
    assert unit_statuses(catalog)[(gone_id, 1)] == "retired"
    assert gone_id not in catalog.current_units()


def test_staged_units_stay_invisible_until_commit(catalog, counter):
    docs = [doc("a")]
    pid, _ = sync(catalog, docs)
    catalog.stage_units(pid, plan_units(docs, counter))
    assert catalog.current_units() == {}
    assert set(unit_statuses(catalog).values()) == {"pending"}
    assert len(catalog.live_units()) == 1


def test_restaged_units_after_a_crash_abandon_the_pending_ones_and_never_reuse_a_version(catalog, counter):
    docs = [doc("a")]
    plan = plan_units(docs, counter)
    [unit_id] = [u.unit_id for u in plan.units]
    crashed, _ = sync(catalog, docs)
    catalog.stage_units(crashed, plan)
    retry = catalog.begin_publish([SRC])
    changes = catalog.stage_units(retry, plan)
    catalog.commit_units(retry, lance_version=1, embedded=0)
    assert changes.published == [(unit_id, 2)]
    assert unit_statuses(catalog) == {(unit_id, 1): "abandoned", (unit_id, 2): "current"}
    assert catalog.rows("SELECT status FROM publish_log ORDER BY publish_id") == [("interrupted",), ("published",)]
    later = catalog.begin_publish([SRC])
    catalog.stage_units(later, plan_units([replace(docs[0], version="2", text="Revised.")], counter))
    assert max(v for (_, v) in unit_statuses(catalog)) == 3


def test_unit_members_record_document_versions_and_ranges(catalog, counter):
    docs = [doc("a", "2026", "Alpha body.", links=("b",)), doc("b", "7", "Beta.")]
    publish_units(catalog, docs, counter)
    members = catalog.rows("SELECT doc_id, doc_version, part, char_start, char_end FROM unit_members ORDER BY doc_id")
    assert members == [("a", "2026", 0, 0, len("Alpha body.")), ("b", "7", 0, 0, len("Beta."))]


def test_the_publish_log_keeps_no_unit_keys_once_the_units_are_committed(catalog, counter):
    docs = [doc("a"), doc("b")]
    publish_units(catalog, docs, counter)
    publish_units(catalog, [docs[0], replace(docs[1], version="2", text="Revised.")], counter)
    assert catalog.rows("SELECT count(*) FROM publish_log WHERE units_retired IS NOT NULL") == [(0,)]
    assert "units_published" not in [c for (c,) in catalog.rows(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'publish_log'")]


def test_as_of_reads_keep_the_index_versions_of_the_retention_and_of_the_publish_current_at_its_start(catalog,
                                                                                                      monkeypatch):
    monkeypatch.setenv("RAG_INDEX_RETENTION_DAYS", "7")
    for version, days_ago in ((3, 20), (5, 10), (9, 2), (13, 0)):
        pid = catalog.begin_publish([SRC])
        catalog.commit_units(pid, lance_version=version, embedded=0)
        catalog.con.execute("UPDATE publish_log SET finished_at = finished_at - INTERVAL (?) DAY WHERE publish_id = ?",
                            [days_ago, pid])
    assert catalog.as_of_versions() == {5, 9, 13}


def test_published_unit_history_leaves_the_writers_catalog_and_stays_in_the_read_state(tmp_path, counter):
    """Held once: a replaced unit version and the members of a retired one live only where as-of reads read them."""
    catalog = Catalog(tmp_path / "catalog.duckdb")
    docs = [doc("a", links=("b",)), doc("b"), doc("c", "2025", "Old."), doc("d")]
    try:
        publish_units(catalog, docs, counter)
        first = catalog.latest_publish()
        catalog.publish_snapshot(first)
        [gone_id] = [u.unit_id for u in plan_units([docs[3]], counter).units]
        changes = publish_units(catalog, [*docs[:2], doc("c", "2026", "New.")], counter)
        catalog.publish_snapshot(catalog.latest_publish())
        [(changed_id, version)] = changes.published
        assert version == 2
        assert (changed_id, 1) not in unit_statuses(catalog)
        assert unit_statuses(catalog)[(gone_id, 1)] == "retired"  # the newest version of a unit stays: numbering
        assert catalog.rows("SELECT count(*) FROM unit_members WHERE unit_id IN (?, ?)", [changed_id, gone_id]) == \
            [(1,)]
        assert catalog.rows("SELECT count(*) FROM doc_facts WHERE doc_id = 'c' AND version = '2025'") == [(0,)]
        reader = Catalog.snapshot(tmp_path, read_pointer(tmp_path))
        try:
            assert unit_statuses(reader)[(changed_id, 1)] == "retired"
            then = {(m.unit_key, m.doc_id, m.doc_version) for m in reader.current_members(
                as_of=catalog.publish_finished(first))}
            assert (f"{changed_id}@1", "c", "2025") in then and (f"{gone_id}@1", "d", "1") in then
            _, units = reader.history("c")
            assert {(u.doc_version, u.status) for u in units} == {("2025", "retired"), ("2026", "current")}
        finally:
            reader.close()
        changes = publish_units(catalog, [*docs[:2], doc("c", "2026", "New."), doc("d")], counter)
        assert (gone_id, 2) in changes.published
    finally:
        catalog.close()
