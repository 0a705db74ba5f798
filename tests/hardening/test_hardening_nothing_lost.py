"""Class 6: an input that cannot be read never deletes what it published; default ids are unique and stable."""
import json
import shutil

import pytest
from hardening_helpers import current, good, write

from rag.sources.loaders import load_sources
from rag.store.catalog import Catalog
from rag.store.publish import publish_documents
from rag.store.settings import IngestSettings


def sync(catalog, *sources, **kw):
    changes, _ = publish_documents(catalog, IngestSettings(sources=[str(s) for s in sources], **kw))
    return changes


def record(doc_id, text="Text.", acl=("support",)):
    return json.dumps({"doc_id": doc_id, "text": text, "acl": list(acl)})


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog(tmp_path / ".ws" / "catalog.duckdb")  # a dot-folder: skipped when tmp_path is the source
    yield cat
    cat.close()


@pytest.mark.parametrize("broken", [
    '{"doc_id": "b", "text": "Text.", "acl": ["support"]',           # truncated
    '{"doc_id": "b", "text": "Text.", "acl": ["support"], }',        # trailing comma
    '{"doc_id": "b", "text": "\\ud800", "acl": ["support"]}',       # lone surrogate
    '{"doc_id": "b", "text": "", "acl": ["support"]}',              # emptied
    '{"doc_id": "b", "text": "Text.", "acl": null}',                 # ACL broken
])
def test_a_published_jsonl_record_that_breaks_in_place_is_kept(tmp_path, catalog, broken):
    path = write(tmp_path, "docs.jsonl", "\n".join([record("a"), record("b"), record("c")]) + "\n")
    sync(catalog, path)
    path.write_text("\n".join([record("a"), broken, record("c")]) + "\n")
    changes = sync(catalog, path)
    assert changes.deleted == []
    assert set(current(catalog)) == {"a", "b", "c"}


def test_a_broken_record_that_moved_to_another_line_is_kept_by_its_id(tmp_path, catalog):
    path = write(tmp_path, "docs.jsonl", "\n".join([record("a"), record("b")]) + "\n")
    sync(catalog, path)
    path.write_text("\n".join([record("new-1"), record("new-2"), record("a"), '{"doc_id": "b", "text": ']) + "\n")
    assert sync(catalog, path).deleted == []
    assert set(current(catalog)) == {"a", "b", "new-1", "new-2"}


def test_a_record_broken_beyond_reading_its_id_holds_back_the_deletions_of_its_file(tmp_path, catalog):
    path = write(tmp_path, "docs.jsonl", "\n".join([record("a"), record("b"), record("c")]) + "\n")
    sync(catalog, path)
    path.write_text("\n".join([record("a"), record("d"), '{"do\x00c_id": "b", garbage']) + "\n")
    changes = sync(catalog, path)
    assert changes.deleted == []
    assert set(current(catalog)) == {"a", "b", "c", "d"}
    [warning] = changes.warnings
    assert warning.source_path == str(path) and "held back" in warning.reason and warning.reason.endswith(": b")
    path.write_text("\n".join([record("a"), record("d")]) + "\n")  # once the file reads cleanly, deletions apply
    assert sorted(sync(catalog, path).deleted) == [("b", "1"), ("c", "1")]


def test_a_newer_version_whose_record_broke_beyond_its_id_stays_current_over_an_older_one_held_elsewhere(
        tmp_path, catalog):
    """An older version in another file does not take over while an unreadable record may still be the newer one."""
    folder = tmp_path / "src"
    write(folder, "a.md", good("a"))
    path = write(folder, "docs.jsonl", "\n".join([record("b"), json.dumps(
        {"doc_id": "a", "version": "2", "text": "Alpha, second.", "acl": ["support"]})]) + "\n")
    sync(catalog, folder)
    path.write_text("\n".join(['{"do\x00c_id": "a", garbage', record("b")]) + "\n")  # a's line gone, or broken
    changes = sync(catalog, folder)
    assert (changes.deleted, changes.superseded, current(catalog)["a"][0]) == ([], [], "2")
    [warning] = changes.warnings
    assert warning.source_path == str(path) and "held back" in warning.reason and warning.reason.endswith(": a")
    path.write_text(record("b") + "\n")  # once the file reads cleanly, the older version is current again
    assert sync(catalog, folder).deleted == [("a", "2")]
    assert current(catalog)["a"][0] == "1"


def test_a_jsonl_file_truncated_to_nothing_keeps_its_documents(tmp_path, catalog):
    path = write(tmp_path, "docs.jsonl", "\n".join([record("a"), record("b")]) + "\n")
    other = write(tmp_path / "more", "x.md", good("x"))
    sync(catalog, path, other.parent)
    path.write_text("")
    changes = sync(catalog, path, other.parent)
    assert changes.deleted == []
    assert {"empty file (no JSON records)"} <= {r.reason for r in changes.rejected}


@pytest.mark.parametrize("breakage", [
    lambda text: text.replace("acl: [support]", "acl: [support"),                # YAML broken
    lambda text: text.replace("---\n# ", "# "),                                   # block left unclosed
    lambda text: text.replace("acl: [support]", "acl: [support]\nacl: [x]"),     # duplicate key
    lambda text: text.encode("utf-8").replace(b"Plain", b"Pl\xe9in"),            # no longer UTF-8
    lambda text: text.replace("version: \"1\"", "version: \"final\""),          # unorderable label
], ids=["yaml", "unclosed", "duplicate key", "encoding", "label"])
def test_a_markdown_file_renamed_and_broken_in_one_edit_keeps_its_published_id(tmp_path, catalog, breakage):
    src = tmp_path / "src"
    old = write(src, "guide.md", good("install-guide", "Plain text."))
    write(src, "other.md", good("other"))
    sync(catalog, src)
    content = breakage(old.read_text())
    old.unlink()
    write(src, "renamed/guide-v2.md", content)
    changes = sync(catalog, src)
    assert changes.deleted == []
    assert "install-guide" in current(catalog)
    assert any(r.doc_id == "install-guide" for r in changes.rejected)


def test_a_file_broken_in_place_keeps_its_document_and_the_old_text(tmp_path, catalog):
    path = write(tmp_path, "guide.md", good("guide", "Published text."))
    write(tmp_path, "other.md", good("other"))
    sync(catalog, tmp_path)
    path.write_bytes(b"\x00\x01binary now")
    assert sync(catalog, tmp_path).deleted == []
    assert {d.doc_id: d.text for d in catalog.current_documents()}["guide"].endswith("Published text.")


def test_a_source_that_is_not_there_deletes_nothing(tmp_path, catalog):
    src, keep = tmp_path / "mounted", tmp_path / "keep"
    write(src, "a.md", good("a"))
    write(keep, "b.md", good("b"))
    sync(catalog, src, keep)
    shutil.rmtree(src)  # an unmounted share looks like this
    changes = sync(catalog, src, keep)
    assert changes.deleted == [] and set(current(catalog)) == {"a", "b"}


@pytest.mark.parametrize("names", [
    ["release-1.2/intro.md", "release-1.3/intro.md"],
    ["notes.v1.md", "notes.v2.md", "notes.md"],
    ["a.b.c.md", "a.b.md", "a.md"],
    ["2026.01.md", "2026.1.md"],
    ["dir.v1/x.md", "dir.v2/x.md", "dir/x.md"],
])
def test_default_ids_of_distinct_paths_are_distinct(tmp_path, names):
    for name in names:
        write(tmp_path, name, f"# {name}\n\nBody of {name}.\n")
    result = load_sources([tmp_path], default_acl=("support",))
    assert result.rejected == []
    assert sorted(d.doc_id for d in result.documents) == sorted(n.removesuffix(".md") for n in names)


def test_default_ids_are_stable_across_runs(tmp_path, catalog):
    write(tmp_path, "release-1.2/intro.md", "# Intro\n\nBody.\n")
    write(tmp_path, "notes.v1.md", "# Notes\n\nBody.\n")
    first = sync(catalog, tmp_path, default_acl=("support",))
    second = sync(catalog, tmp_path, default_acl=("support",))
    assert sorted(d for d, _ in first.new) == ["notes.v1", "release-1.2/intro"]
    assert second.new == [] and second.deleted == [] and second.rejected == []


def test_the_one_default_id_collision_is_named_not_silent(tmp_path):
    write(tmp_path, "a.md", "# A\n\nMarkdown.\n")
    write(tmp_path, "a.txt", "Plain text.\n")
    from rag.sources.versions import reconcile_versions

    loaded = load_sources([tmp_path], default_acl=("support",))
    plan = reconcile_versions({}, loaded.documents, loaded.rejected, loaded.scanned)
    [rejection] = plan.rejected
    assert "duplicate document id 'a'" in rejection.reason and str(tmp_path / "a.md") in rejection.reason
