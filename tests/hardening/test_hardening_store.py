"""Class 8: an index that does not belong to the catalog is detected and rebuilt; checks compare every row."""
import shutil
from pathlib import Path

import pytest
from hardening_helpers import good, publish_all, write

from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.store import consistency
from rag.store.index import IDENTITY_TABLE

LONG = " ".join(f"Sentence {i} explains how the turbine gearbox is serviced." for i in range(60))


def sources_in(folder: Path) -> Path:
    src = folder / "src"
    write(src, "gearbox.md", good("gearbox", LONG, acl="secret-team"))
    write(src, "other.md", good("other", "Blade inspection happens every spring."))
    return src


@pytest.fixture
def source(tmp_path):
    return sources_in(tmp_path)


@pytest.fixture(scope="module")
def published(tmp_path_factory, embedder):
    """One published workspace for the row-check cases, each of which tampers with it and restores it."""
    folder = tmp_path_factory.mktemp("row-check")
    catalog, index, _, _ = publish_all(folder / "ws", [sources_in(folder)], embedder.encode)
    yield catalog, index
    catalog.close()


def checks(catalog, index):
    return [consistency.documents_in_exactly_one_unit(catalog), consistency.index_matches_current_units(catalog, index),
            consistency.no_stale_rows(catalog, index), consistency.index_rows_match_catalog(catalog, index)]


def served(catalog, index, embedder, groups):
    """What the read side serves from the workspace's newest published snapshot."""
    reader, caller = Workspace(Path(catalog.path).parent, lance_uri=index.uri, embedder=embedder), Caller(frozenset(groups))
    return {i.doc_id: i.text for method in ("longrag", "shortchunk")
            for i in reader.retrieve(method, caller, "turbine gearbox service", 4000).items}


def test_a_lost_catalog_with_the_index_kept_and_a_source_changed_in_place_is_rebuilt(tmp_path, source, embedder):
    catalog, index, _, _ = publish_all(tmp_path / "ws", [source], embedder.encode)
    catalog.close()
    (tmp_path / "ws" / "catalog.duckdb").unlink()
    # Same id, same version label, another ACL and a much shorter text.
    write(source, "gearbox.md", good("gearbox", "The gearbox is sealed.", acl="support"))
    catalog, index, _, report = publish_all(tmp_path / "ws", [source], embedder.encode)
    assert report.foreign_rows_removed > 0 and report.embedded > 0
    assert all(f.passed for f in checks(catalog, index)), [f.summary for f in checks(catalog, index)]
    acl = index.table.to_lance().to_table(columns=["acl"], filter="doc_id = 'gearbox'").column("acl").to_pylist()
    assert acl and all(a == ["support"] for a in acl)
    assert "gearbox" not in served(catalog, index, embedder, {"secret-team"})
    assert "The gearbox is sealed." in served(catalog, index, embedder, {"support"})["gearbox"]


def test_a_lost_index_is_rebuilt_from_the_catalog(tmp_path, source, embedder):
    catalog, index, _, first = publish_all(tmp_path / "ws", [source], embedder.encode)
    catalog.close()
    shutil.rmtree(tmp_path / "ws" / "lancedb")
    catalog, index, _, report = publish_all(tmp_path / "ws", [source], embedder.encode)
    assert report.subchunks == first.subchunks and report.units_indexed > 0
    assert all(f.passed for f in checks(catalog, index))


def test_an_index_of_another_workspace_is_replaced_not_trusted(tmp_path, source, embedder):
    other = tmp_path / "other-src"
    write(other, "gearbox.md", good("gearbox", "A different gearbox text entirely.", acl="everyone"))
    publish_all(tmp_path / "ws-b", [other], embedder.encode)[0].close()
    publish_all(tmp_path / "ws-a", [source], embedder.encode)[0].close()
    shutil.rmtree(tmp_path / "ws-a" / "lancedb")
    shutil.copytree(tmp_path / "ws-b" / "lancedb", tmp_path / "ws-a" / "lancedb")
    catalog, index, _, report = publish_all(tmp_path / "ws-a", [source], embedder.encode)
    assert report.foreign_rows_removed > 0
    assert all(f.passed for f in checks(catalog, index))
    assert "everyone" not in {g for a in index.table.to_arrow().column("acl").to_pylist() for g in a}


def test_an_index_from_before_store_identities_is_adopted_without_embedding_again(tmp_path, source, embedder):
    catalog, index, _, _ = publish_all(tmp_path / "ws", [source], embedder.encode)
    index.db.drop_table(IDENTITY_TABLE)
    catalog.close()
    catalog, index, _, report = publish_all(tmp_path / "ws", [source], embedder.encode)
    assert report.foreign_rows_removed > 0 and report.embedded == 0
    assert all(f.passed for f in checks(catalog, index))


@pytest.mark.parametrize("tamper, expected", [
    ({"acl": "['everyone']"}, "row ACL"),
    ({"char_end": "char_end + 100000"}, "offsets"),
    ({"char_start": "char_end"}, "offsets"),
    ({"text_hash": "'0000'"}, "another text"),
    ({"doc_version": "'7'"}, "not a member"),
])
def test_the_row_check_fails_when_a_row_disagrees_with_the_catalog(published, tamper, expected):
    catalog, index = published
    clean = index.version
    assert consistency.index_rows_match_catalog(catalog, index).passed
    index.table.to_lance().update(tamper, where="doc_id = 'gearbox'")
    try:
        finding = consistency.index_rows_match_catalog(catalog, index)
    finally:   # the next case starts from the published rows again
        index.table.to_lance().checkout_version(clean).restore()
        index.table.checkout_latest()
    assert not finding.passed
    assert any(expected in e for e in finding.examples), finding.examples
