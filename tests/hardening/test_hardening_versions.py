"""Class 4: the order of version labels, refusal of what cannot be ordered, supersession recorded as such."""
import pytest
from hardening_helpers import good, publish_all, write
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.sources.documents import Document, UnorderableVersion, version_key, version_order
from rag.sources.loaders import load_sources
from rag.sources.versions import reconcile_versions
from rag.store.catalog import Catalog
from rag.store.snapshot_files import read_pointer

SRC = "/data/src"


def doc(version, text="Body.", doc_id="a"):
    return Document(doc_id=doc_id, title=doc_id, text=text, version=version, acl=("support",), source=SRC,
                    source_path=f"{SRC}/{doc_id}.md")


def published(*pairs):
    return {(d.doc_id, d.version): (d.content_hash, d.meta_hash, status, d.source, d.source_path) for d, status in pairs}


@pytest.mark.parametrize("older, newer", [
    ("2026", "2026.0"), ("2026", "2026.1"), ("2026", "2026-02"), ("2026.1", "2026.2"), ("2026.9", "2026.10"),
    ("2026-02", "2026-11"), ("2026-02-01", "2026-02-15"), ("2026-12-31", "2027-01-01"), ("v9", "v10"),
    ("v1", "V2"), ("1", "2"), ("9", "10"), ("1.2.3", "1.2.10"), ("2025", "v2026"), ("2026_1", "2026_2"),
    ("2026", "2026-01-01"), ("1.0", "1.0.1"),
])
def test_labels_order_by_their_numbers_left_to_right_with_a_prefix_first(older, newer):
    assert version_key(older) < version_key(newer)


@pytest.mark.parametrize("label", ["draft", "latest", "2026a", "1.0-rc1", "v", "2026.", ".1", "1..2", "v-1",
                                   "2026/02", "1,2", "x2", "2026 02", "一", "٣", "9" * 19])
def test_labels_that_cannot_be_ordered_are_refused(label):
    with pytest.raises(UnorderableVersion):
        version_order(label)


def test_a_file_with_an_unorderable_label_is_quarantined(tmp_path):
    write(tmp_path, "doc.md", "---\nid: a\nversion: final\nacl: [support]\n---\nBody.\n")
    result = load_sources([tmp_path])
    assert result.documents == []
    assert "cannot be ordered" in result.rejected[0].reason


components = st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=5)
separators = st.lists(st.sampled_from(".-_"), min_size=4, max_size=4)
prefixes = st.sampled_from(["", "v", "V"])


def spell(parts, seps, prefix):
    out = prefix + str(parts[0])
    for p, s in zip(parts[1:], seps):
        out += s + str(p)
    return out


labels = st.builds(spell, components, separators, prefixes)


@settings(max_examples=500, deadline=None)
@given(components, separators, prefixes)
def test_every_spelled_label_reads_back_as_its_numbers(parts, seps, prefix):
    assert version_order(spell(parts, seps, prefix)) == tuple(parts)


@settings(max_examples=1000, deadline=None)
@given(labels, labels, labels)
def test_the_order_of_labels_is_total_and_follows_the_numbers(a, b, c):
    ka, kb, kc = version_key(a), version_key(b), version_key(c)
    assert (ka < kb) == (version_order(a) < version_order(b)) or version_order(a) == version_order(b)
    assert (ka < kb) + (ka == kb) + (ka > kb) == 1
    if ka <= kb <= kc:
        assert ka <= kc
    assert (ka == kb) == (a == b)


@settings(max_examples=300, deadline=None)
@given(st.lists(labels, min_size=1, max_size=8, unique_by=version_order))
def test_publishing_labels_in_any_order_keeps_the_newest_current_and_supersedes_the_rest(sequence):
    """Property: whatever order the labels arrive in, one at a time in place, the newest stays current,
    older newcomers are refused and nothing is ever recorded as deleted."""
    rows: dict = {}
    for i, label in enumerate(sequence):
        plan = reconcile_versions(rows, [doc(label, f"Text {i}.")], [], [SRC])
        assert plan.delete == []
        for d in plan.insert:
            rows[(d.doc_id, d.version)] = (d.content_hash, d.meta_hash, "superseded", d.source, d.source_path)
        for key in plan.supersede:
            rows[key] = rows[key][:2] + ("superseded",) + rows[key][3:]
        for key in plan.make_current:
            rows[key] = rows[key][:2] + ("current",) + rows[key][3:]
        [cur] = [v for (_, v), row in rows.items() if row[2] == "current"]
        assert cur == max(sequence[: i + 1], key=version_key)
        assert {r[2] for r in rows.values()} <= {"current", "superseded"}


@pytest.mark.parametrize("newer", ["2026.1", "2026-02", "2026.0", "v2027", "2026.0.1"])
def test_a_newer_label_in_place_supersedes_the_published_one(newer):
    cur = doc("2026", "Old.")
    plan = reconcile_versions(published((cur, "current")), [doc(newer, "New.")], [], [SRC])
    assert plan.make_current == [("a", newer)] and plan.supersede == [("a", "2026")] and plan.delete == []


@pytest.mark.parametrize("older", ["2025", "2025.9", "2025-12-31", "v2025", "1"])
def test_back_dating_a_label_in_place_is_refused_and_the_published_version_stays(older):
    cur = doc("2026", "Current text.")
    plan = reconcile_versions(published((cur, "current")), [doc(older, "Back-dated text.")], [], [SRC])
    [rejection] = plan.rejected
    assert "older than the published version 2026" in rejection.reason
    assert plan.make_current == [] and plan.delete == [] and plan.supersede == [] and plan.insert == []


@pytest.mark.parametrize("same", ["v2026.0", "2026.00", "02026-0", "2026_0"])
def test_a_second_spelling_of_a_published_label_is_refused(same):
    cur = doc("2026.0", "Current.")
    plan = reconcile_versions(published((cur, "current")), [doc(same, "Other.")], [], [SRC])
    assert "orders the same as its version 2026.0" in plan.rejected[0].reason
    assert plan.insert == [] and plan.make_current == [] and plan.delete == []


def test_two_spellings_of_one_label_in_one_load_keep_one_and_refuse_the_other():
    plan = reconcile_versions({}, [doc("2026.1", "One."), doc("2026.01", "Other.")], [], [SRC])
    assert [d.version for d in plan.insert] == ["2026.01"]
    assert "orders the same" in plan.rejected[0].reason


def test_an_older_version_is_not_reinstated_while_the_current_versions_source_was_not_read():
    old = doc("2025", "Old.")
    cur = Document(**{**vars(doc("2026", "New.")), "source": "/data/unmounted", "source_path": "/data/unmounted/a.md"})
    plan = reconcile_versions(published((old, "superseded"), (cur, "current")), [old], [], [SRC])
    assert plan.make_current == [] and plan.delete == []


def test_published_history_records_supersession_through_the_real_catalog(tmp_path, embedder):
    src = tmp_path / "src"
    path = write(src, "doc.md", good("a", "First.", version="2026"))
    for label, text in (("2026.1", "Second."), ("2026-02", "Third."), ("2025", "Back-dated.")):
        publish_all(tmp_path / "ws", [src], embedder.encode)[0].close()
        path.write_text(good("a", text, version=label))
    catalog, *_ = publish_all(tmp_path / "ws", [src], embedder.encode)
    published = Catalog.snapshot(tmp_path / "ws", read_pointer(tmp_path / "ws"))  # where history is kept
    statuses = dict(published.rows("SELECT version, status FROM documents WHERE doc_id = 'a'"))
    published.close()
    assert statuses == {"2026": "superseded", "2026.1": "superseded", "2026-02": "current"}
    [(reason,)] = catalog.rows("SELECT reason FROM quarantine WHERE doc_id = 'a'")
    assert "older than the published version 2026-02" in reason
    assert "Third." in catalog.current_documents()[0].text
