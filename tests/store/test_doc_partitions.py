"""The id → partition record: a partition's publish writes only its changed ids, and the shared-id report reads
the record alone, never another partition's catalog."""
import shutil
from pathlib import Path

import pytest

from rag.query.workspace import published_catalog, shared_ids
from rag.sources.partitions import claim_store, resolve, store
from rag.store import doc_partitions, union_catalog
from rag.store.catalog import Catalog
from rag.store.publish import publish_documents
from rag.store.settings import IngestSettings


def doc(path: Path, doc_id: str, text: str, acl: str = "staff", version: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = f"version: '{version}'\n" if version else ""
    path.write_text(f"---\nid: {doc_id}\ntitle: {doc_id}\nacl: [{acl}]\n{extra}---\n{text}\n")


def publish(ws: Path, src: Path, key: str) -> None:
    """One partition's documents published as its run does (no units, no index: the record needs neither)."""
    s = store(ws, key)
    claim_store(s)
    catalog = Catalog(s.catalog_path)
    try:
        publish_documents(catalog, IngestSettings(sources=[str(src)]).for_partition(resolve([str(src)], key, ws)))
    finally:
        catalog.close()


def corpus(tmp_path: Path) -> Path:
    src = tmp_path / "docs"
    doc(src / "hr" / "salaries.md", "pay-bands", "The pay band for grade 7 is 91,000 to 104,000 euros.", "hr")
    doc(src / "public" / "bands.md", "pay-bands", "Pay bands are published every January.", "everyone")
    doc(src / "public" / "canteen.md", "canteen", "The canteen opens at 11:30 every weekday.", "everyone")
    doc(src / "ops" / "pager.md", "pager", "The pager rotation changes every Monday at nine.")
    return src


@pytest.fixture
def counted_puts(monkeypatch):
    puts: list[str] = []
    put = doc_partitions._Folder.put
    monkeypatch.setattr(doc_partitions._Folder, "put", lambda self, name, body: (puts.append(name),
                                                                                  put(self, name, body))[1])
    return puts


def test_the_record_agrees_with_the_catalogs_and_the_report_opens_none_of_them(tmp_path, monkeypatch):
    src, ws = corpus(tmp_path), tmp_path / "ws"
    for key in ("docs/hr", "docs/ops", "docs/public"):
        publish(ws, src, key)
    with published_catalog(ws) as catalog:
        from_catalogs = catalog.shared_places()
    assert from_catalogs == {"pay-bands": [
        ("docs/hr", "1", str((src / "hr" / "salaries.md").resolve())),
        ("docs/public", "1", str((src / "public" / "bands.md").resolve()))]}

    # With every partition's published catalog gone and any union of them forbidden, the report is the same.
    def forbidden(*args, **kwargs):
        raise AssertionError("a partition's catalog was opened")
    monkeypatch.setattr(union_catalog.UnionCatalog, "__init__", forbidden)
    for key in ("docs/hr", "docs/ops", "docs/public"):
        shutil.rmtree(store(ws, key).folder / "snapshots")
    assert shared_ids(ws) == from_catalogs


def test_a_publish_writes_only_its_changed_ids_and_settles_what_it_shares(tmp_path, counted_puts):
    src, ws = corpus(tmp_path), tmp_path / "ws"
    for key in ("docs/hr", "docs/ops", "docs/public"):
        publish(ws, src, key)
    assert len([n for n in counted_puts if n.startswith("ids/")]) == 4   # one per (id, partition) published

    counted_puts.clear()
    publish(ws, src, "docs/public")   # nothing changed: nothing written
    doc(src / "ops" / "pager.md", "pager", "The pager rotation changes every Tuesday at ten.", version="2")
    publish(ws, src, "docs/ops")
    assert counted_puts == [f"ids/{doc_partitions._hash('pager')}/{store(ws, 'docs/ops').folder.name}.json"]

    (src / "public" / "bands.md").unlink()
    publish(ws, src, "docs/public")
    assert shared_ids(ws) == {}
    assert doc_partitions._Folder(ws / doc_partitions.RECORD_DIR).names("shared") == []

    doc(src / "ops" / "bands.md", "pay-bands", "Ops keeps a copy of the pay bands.")
    publish(ws, src, "docs/ops")
    assert {p for p, _, _ in shared_ids(ws)["pay-bands"]} == {"docs/hr", "docs/ops"}


def test_a_store_published_before_the_record_fills_it_on_its_next_run_even_with_nothing_changed(tmp_path):
    src, ws = corpus(tmp_path), tmp_path / "ws"
    for key in ("docs/hr", "docs/public"):
        publish(ws, src, key)
    shutil.rmtree(ws / doc_partitions.RECORD_DIR)
    for key in ("docs/hr", "docs/public"):
        (store(ws, key).folder / doc_partitions.RECORDED).unlink()
    assert shared_ids(ws) == {}

    for key in ("docs/hr", "docs/public"):
        publish(ws, src, key)
    assert list(shared_ids(ws)) == ["pay-bands"]


def test_the_publishers_of_an_id_are_the_other_partitions_that_hold_or_held_it_and_no_others(tmp_path):
    src, ws = corpus(tmp_path), tmp_path / "ws"
    for key in ("docs/hr", "docs/ops", "docs/public"):
        publish(ws, src, key)
    folder = {key: store(ws, key).folder.name for key in ("docs/hr", "docs/ops", "docs/public", "docs/new")}
    assert doc_partitions.publishers(ws, "docs/new", ["never-published", "nor-this"]) == []
    assert doc_partitions.publishers(ws, "docs/ops", ["pager"]) == []   # its own
    assert doc_partitions.publishers(ws, "docs/new", ["canteen", "pager"]) == [folder["docs/ops"],
                                                                             folder["docs/public"]]
    assert doc_partitions.publishers(ws, "docs/ops", ["pay-bands"]) == [folder["docs/hr"], folder["docs/public"]]

    (src / "public" / "canteen.md").unlink()   # its vectors stay in the public index: that partition is still named
    publish(ws, src, "docs/public")
    assert doc_partitions.publishers(ws, "docs/new", ["canteen"]) == [folder["docs/public"]]
    doc(src / "ops" / "canteen.md", "canteen", "The canteen opens at 11:30 every weekday.", "everyone")
    publish(ws, src, "docs/ops")
    assert doc_partitions.publishers(ws, "docs/new", ["canteen"]) == [folder["docs/ops"], folder["docs/public"]]
    assert doc_partitions.publishers(ws, "docs/ops", ["canteen"]) == [folder["docs/public"]]
    assert list(shared_ids(ws)) == ["pay-bands"]   # an id a partition left is not shared with it
