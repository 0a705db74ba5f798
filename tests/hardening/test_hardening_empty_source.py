"""Class 10 (load side): emptying a source is an explicit, safe operation; an empty JSONL file gets a row."""
import pytest
from hardening_helpers import current, good, publish_all, write

from rag.store import consistency
from rag.store.catalog import Catalog
from rag.store.publish import NothingToPublish, publish_documents
from rag.store.settings import IngestSettings


def sync(catalog, *sources, **kw):
    return publish_documents(catalog, IngestSettings(sources=[str(s) for s in sources], **kw))[0]


@pytest.fixture
def catalog(tmp_path):
    cat = Catalog(tmp_path / "ws" / "catalog.duckdb")
    yield cat
    cat.close()


def test_removing_the_last_document_stops_with_a_hint_and_keeps_it_served(tmp_path, catalog):
    src = tmp_path / "src"
    only = write(src, "only.md", good("only"))
    sync(catalog, src)
    only.unlink()
    with pytest.raises(NothingToPublish, match="allow empty sources"):
        sync(catalog, src)
    assert set(current(catalog)) == {"only"}


def test_allowing_empty_sources_publishes_the_deletion_of_the_last_document(tmp_path, embedder):
    src = tmp_path / "src"
    only = write(src, "only.md", good("only", "The last document."))
    publish_all(tmp_path / "ws", [src], embedder.encode)[0].close()
    only.unlink()
    catalog, index, changes, report = publish_all(tmp_path / "ws", [src], embedder.encode, allow_empty=True)
    assert changes.deleted == [("only", "1")]
    assert current(catalog) == {} and report.subchunks == 0 and index.count() == 0
    assert consistency.documents_in_exactly_one_unit(catalog).passed
    assert consistency.index_matches_current_units(catalog, index).passed


def test_one_source_that_becomes_empty_keeps_its_documents_with_a_warning(tmp_path, catalog):
    a, b = tmp_path / "a", tmp_path / "b"
    gone = write(a, "x.md", good("x"))
    write(b, "y.md", good("y"))
    sync(catalog, a, b)
    gone.unlink()
    changes = sync(catalog, a, b)
    assert changes.deleted == [] and set(current(catalog)) == {"x", "y"}
    [warning] = changes.warnings
    assert warning.source_path == str(a) and "holds no readable document" in warning.reason
    assert sync(catalog, a, b, allow_empty=True).deleted == [("x", "1")]


def test_allowing_empty_sources_never_deletes_for_a_source_that_is_not_there(tmp_path, catalog):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "x.md", good("x"))
    write(b, "y.md", good("y"))
    sync(catalog, a, b)
    (a / "x.md").unlink()
    a.rmdir()
    assert sync(catalog, a, b, allow_empty=True).deleted == []
    assert set(current(catalog)) == {"x", "y"}


def test_allowing_empty_sources_still_keeps_documents_whose_files_cannot_be_read(tmp_path, catalog):
    src = tmp_path / "src"
    path = write(src, "x.md", good("x"))
    sync(catalog, src)
    path.write_bytes(b"\x00garbled")
    assert sync(catalog, src, allow_empty=True).deleted == []
    assert set(current(catalog)) == {"x"}


@pytest.mark.parametrize("content", ["", "\n\n   \n"], ids=["zero bytes", "blank lines"])
def test_an_empty_jsonl_file_gets_a_quarantine_row(tmp_path, catalog, content):
    write(tmp_path / "src", "good.md", good("g"))
    path = write(tmp_path / "src", "docs.jsonl", content)
    sync(catalog, tmp_path / "src")
    assert ("rejected", str(path), None, "empty file (no JSON records)") in catalog.quarantine()


def test_an_empty_jsonl_source_deletes_its_documents_only_when_empty_sources_are_allowed(tmp_path, catalog):
    path = write(tmp_path, "docs.jsonl", '{"doc_id": "r", "text": "T.", "acl": ["support"]}\n')
    keep = write(tmp_path / "md", "k.md", good("k"))
    sync(catalog, path, keep.parent)
    path.write_text("")
    assert sync(catalog, path, keep.parent).deleted == []
    assert sync(catalog, path, keep.parent, allow_empty=True).deleted == [("r", "1")]
