"""Version reconciliation: which version of each document is current after a load."""
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.sources.documents import Document, Rejected
from rag.sources.loaders import load_sources
from rag.sources.versions import reconcile_versions

BAD = Path(__file__).resolve().parents[2] / "samples" / "bad"
SRC = "/data/src"


def doc(doc_id, version, text="Body.", acl=("support",), source=SRC):
    return Document(doc_id=doc_id, title=doc_id, text=text, version=version, acl=acl, source=source,
                    source_path=f"{source}/{doc_id}.{version}.md")


def published(*docs_and_status):
    """The catalog's view: (doc_id, version) → (content_hash, meta_hash, status, source, source_path)."""
    return {(d.doc_id, d.version): (d.content_hash, d.meta_hash, status, d.source, d.source_path)
            for d, status in docs_and_status}


def test_new_document_is_inserted_and_made_current():
    d = doc("a", "2026")
    plan = reconcile_versions({}, [d], [], [SRC])
    assert plan.insert == [d]
    assert plan.make_current == [("a", "2026")]
    assert plan.rejected == [] and plan.delete == [] and plan.supersede == []


def test_two_versions_in_one_load_make_the_newer_current():
    old, new = doc("a", "2025", "Old."), doc("a", "2026", "New.")
    plan = reconcile_versions({}, [new, old], [], [SRC])
    assert sorted(d.version for d in plan.insert) == ["2025", "2026"]
    assert plan.make_current == [("a", "2026")]


def test_newer_version_supersedes_the_published_one():
    old, new = doc("a", "2025", "Old."), doc("a", "2026", "New.")
    plan = reconcile_versions(published((old, "current")), [old, new], [], [SRC])
    assert plan.insert == [new]
    assert plan.make_current == [("a", "2026")]
    assert plan.supersede == [("a", "2025")]


def test_versions_compare_naturally_not_as_strings():
    v9, v10 = doc("a", "v9", "Nine."), doc("a", "v10", "Ten.")
    assert reconcile_versions({}, [v9, v10], [], [SRC]).make_current == [("a", "v10")]


def test_unchanged_document_needs_no_change():
    d = doc("a", "2026")
    plan = reconcile_versions(published((d, "current")), [d], [], [SRC])
    assert (plan.insert, plan.update_meta, plan.make_current, plan.supersede, plan.delete, plan.rejected) == (
        [], [], [], [], [], [])


def test_changed_text_under_the_same_version_is_rejected_and_the_published_text_stays():
    d = doc("a", "2026", "Original.")
    edited = doc("a", "2026", "Edited without a new version.")
    plan = reconcile_versions(published((d, "current")), [edited], [], [SRC])
    [rejection] = plan.rejected
    assert "version 2026" in rejection.reason
    assert (rejection.source_path, rejection.doc_id) == (edited.source_path, "a")
    assert plan.insert == [] and plan.update_meta == [] and plan.make_current == [] and plan.delete == []


def test_older_version_than_the_published_one_is_rejected():
    cur, older = doc("a", "2026", "New."), doc("a", "2025", "Old.")
    plan = reconcile_versions(published((cur, "current")), [cur, older], [], [SRC])
    [rejection] = plan.rejected
    assert "older than the published version 2026" in rejection.reason
    assert plan.insert == [] and plan.make_current == [] and plan.supersede == []


def test_document_gone_from_a_scanned_source_is_deleted():
    a, b = doc("a", "1"), doc("b", "1")
    plan = reconcile_versions(published((a, "current"), (b, "current")), [a], [], [SRC])
    assert plan.delete == [("b", "1")]


def test_document_of_a_source_not_scanned_this_run_is_untouched():
    other = doc("b", "1", source="/data/other")
    plan = reconcile_versions(published((other, "current")), [doc("a", "1")], [], [SRC])
    assert plan.delete == [] and plan.supersede == []


def test_document_whose_file_is_rejected_this_run_is_not_deleted():
    d = doc("a", "1")
    bad_edit = Rejected(d.source_path, "malformed front matter at line 3: mapping values are not allowed")
    plan = reconcile_versions(published((d, "current")), [], [bad_edit], [SRC])
    assert plan.delete == []
    assert plan.rejected == [bad_edit]


def test_document_rejected_by_id_elsewhere_is_not_deleted():
    d = doc("a", "1")
    plan = reconcile_versions(published((d, "current")), [], [Rejected(f"{SRC}/x.jsonl:4", "empty text", "a")], [SRC])
    assert plan.delete == []


def test_duplicate_id_and_version_with_different_content_rejects_the_second_naming_the_first():
    loaded = [d for d in load_sources([BAD]).documents if d.doc_id == "dup-doc"]
    plan = reconcile_versions({}, loaded, [], [str(BAD)])
    [rejection] = plan.rejected
    assert rejection.source_path == str(BAD / "duplicate-b.md")
    assert str(BAD / "duplicate-a.md") in rejection.reason
    assert [d.source_path for d in plan.insert] == [str(BAD / "duplicate-a.md")]


def test_identical_duplicate_collapses_silently():
    d = doc("a", "1")
    copy = Document(**{**vars(d), "source_path": f"{SRC}/copy.md"})
    plan = reconcile_versions({}, [d, copy], [], [SRC])
    assert plan.rejected == []
    assert len(plan.insert) == 1 and plan.make_current == [("a", "1")]


def test_acl_change_at_the_same_version_updates_metadata_in_place():
    d = doc("a", "1", acl=("support",))
    widened = doc("a", "1", acl=("partners", "support"))
    plan = reconcile_versions(published((d, "current")), [widened], [], [SRC])
    assert plan.update_meta == [widened]
    assert plan.rejected == [] and plan.insert == [] and plan.make_current == []


def test_moved_file_updates_the_source_path_in_place():
    d = doc("a", "1")
    moved = Document(**{**vars(d), "source_path": f"{SRC}/archive/a.md"})
    assert reconcile_versions(published((d, "current")), [moved], [], [SRC]).update_meta == [moved]


def test_removing_the_current_versions_file_reinstates_the_older_version():
    old, new = doc("a", "2025", "Old."), doc("a", "2026", "New.")
    plan = reconcile_versions(published((old, "superseded"), (new, "current")), [old], [], [SRC])
    assert plan.make_current == [("a", "2025")]
    assert plan.delete == [("a", "2026")]
    assert plan.supersede == []


def test_deleted_document_that_comes_back_is_current_again():
    d = doc("a", "1")
    plan = reconcile_versions(published((d, "deleted")), [d], [], [SRC])
    assert plan.make_current == [("a", "1")]


def test_bad_edit_of_the_current_version_does_not_reinstate_the_older_version():
    old, new = doc("a", "2025", "Old."), doc("a", "2026", "New.")
    edited = doc("a", "2026", "New, edited without a new version.")
    plan = reconcile_versions(published((old, "superseded"), (new, "current")), [old, edited], [], [SRC])
    assert plan.delete == []
    assert plan.make_current == []


def test_rejected_file_of_the_current_version_does_not_reinstate_the_older_version():
    old, new = doc("a", "2025", "Old."), doc("a", "2026", "New.")
    bad_edit = Rejected(new.source_path, "malformed front matter at line 4: did not find expected ',' or ']'")
    plan = reconcile_versions(published((old, "superseded"), (new, "current")), [old], [bad_edit], [SRC])
    assert plan.delete == []
    assert plan.make_current == []


def apply(existing, plan):
    """Apply a plan to the catalog's view the way sync_documents does."""
    rows = dict(existing)
    for d in plan.insert:
        rows[(d.doc_id, d.version)] = (d.content_hash, d.meta_hash, "superseded", d.source, d.source_path)
    for d in plan.update_meta:
        h, _, status, _, _ = rows[(d.doc_id, d.version)]
        rows[(d.doc_id, d.version)] = (h, d.meta_hash, status, d.source, d.source_path)
    for status, keys in (("superseded", plan.supersede), ("deleted", plan.delete)):
        for key in keys:
            rows[key] = rows[key][:2] + (status,) + rows[key][3:]
    for key in plan.make_current:
        rows[key] = rows[key][:2] + ("current",) + rows[key][3:]
    return rows


loads = st.lists(
    st.lists(st.builds(doc, st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2", "3", "10"]),
                       st.sampled_from(["Text one.", "Text two."]), st.sampled_from([("support",), ("partners",)])),
             max_size=6),
    min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(loads)
def test_any_sequence_of_loads_leaves_at_most_one_current_version_per_document(sequence):
    rows = {}
    for loaded in sequence:
        rows = apply(rows, reconcile_versions(rows, loaded, [], [SRC]))
        current = [d for (d, _), row in rows.items() if row[2] == "current"]
        assert len(current) == len(set(current))


@settings(max_examples=300, deadline=None)
@given(loads)
def test_any_sequence_of_loads_publishes_every_document_that_was_accepted(sequence):
    rows = {}
    for loaded in sequence:
        plan = reconcile_versions(rows, loaded, [], [SRC], allow_empty=True)
        rows = apply(rows, plan)
        refused = {(r.doc_id, r.source_path) for r in plan.rejected}
        accepted = {d.doc_id for d in loaded if (d.doc_id, d.source_path) not in refused}
        current = {d for (d, _), row in rows.items() if row[2] == "current"}
        assert accepted <= current
        assert current <= {d.doc_id for d in loaded}
