"""A permission change is its own kind of change: the ACL is re-published in place, in every unit and index row,
with nothing embedded again, and a revocation is hidden from the next read."""
import json

from rag.models.tokens import default_counter
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.sources.access import ACCESS_FILE
from rag.store.catalog import Catalog
from rag.store.consistency import index_rows_match_catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings

TEXTS = {"finance/q1.md": "First quarter revenue grew in the northern region thanks to gateway sales.",
         "finance/q2.md": "Second quarter margins fell because of antenna component costs.",
         "finance/deep/audit.md": "The audit found the certificate rotation log complete for the year."}


def source(tmp_path):
    src = tmp_path / "src"
    for rel, text in TEXTS.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text + "\n")
    (src / "finance" / "ledger.jsonl").write_text(json.dumps({"doc_id": "ledger", "text": "Ledger entries for "
                                                              "the gateway firmware purchase."}) + "\n")
    (src / "public.md").write_text("The public handbook explains how to ground the gateway.\n")
    (src / "finance" / ACCESS_FILE).write_text("acl: [finance, audit]\n")
    return src


def publish(workspace, src, embedder, **kw):
    catalog, index = Catalog(workspace / "catalog.duckdb"), SubchunkIndex(workspace / "lancedb")
    settings = IngestSettings(sources=[str(src)], default_acl=("staff",), **kw)
    changes, _ = publish_documents(catalog, settings)
    _, units = publish_units(catalog, default_counter(), settings)
    report = publish_index(catalog, index, embedder.encode, default_counter(), settings)
    return catalog, index, changes, report


def acls(catalog):
    docs = dict(catalog.rows("SELECT doc_id, acl FROM documents WHERE status = 'current'"))
    units = {tuple(a) for (a,) in catalog.rows("SELECT DISTINCT acl FROM units WHERE status = 'current'")}
    return docs, units


def seen_by(workspace, embedder, groups):
    ws = Workspace(workspace, embedder=embedder)
    try:
        found = set()
        for question in ("quarter revenue margins", "audit certificate rotation", "ledger firmware purchase",
                         "ground the gateway"):
            found |= {i.doc_id for i in ws.retrieve("longrag", Caller(frozenset(groups)), question, 4000).items}
        return found
    finally:
        ws.close()


def test_a_folder_file_edit_republishes_every_acl_below_it_in_place_and_embeds_nothing(tmp_path, embedder):
    src, workspace = source(tmp_path), tmp_path / "ws"
    catalog, index, first, report = publish(workspace, src, embedder)
    assert report.embedded > 0 and len(first.new) == 5
    below = {"finance/q1", "finance/q2", "finance/deep/audit", "ledger"}
    assert seen_by(workspace, embedder, {"audit"}) == below
    catalog.close()

    (src / "finance" / ACCESS_FILE).write_text("acl: [finance]\n")   # audit loses the folder
    catalog, index, second, report = publish(workspace, src, embedder)
    assert (second.new, second.superseded, second.deleted) == ([], [], [])
    assert sorted(d for d, _ in second.updated_in_place) == sorted(below)
    assert report.embedded == 0 and second.reading["files_read"] == 4
    docs, units = acls(catalog)
    assert {d: tuple(a) for d, a in docs.items()} == {**{d: ("finance",) for d in below}, "public": ("staff",)}
    assert units == {("finance",), ("staff",)}
    finding = index_rows_match_catalog(catalog, index)
    assert finding.passed, finding.examples
    assert {tuple(a) for a in index.row_facts().column("acl").to_pylist()} == {("finance",), ("staff",)}
    assert seen_by(workspace, embedder, {"audit"}) == set()
    assert seen_by(workspace, embedder, {"finance"}) == below


def test_a_document_narrowing_inside_its_folder_is_an_in_place_change_too(tmp_path, embedder):
    src, workspace = source(tmp_path), tmp_path / "ws"
    publish(workspace, src, embedder)[0].close()
    (src / "finance" / "q1.md").write_text("---\nid: finance/q1\nacl: [audit]\n---\n" + TEXTS["finance/q1.md"] + "\n")
    catalog, index, changes, report = publish(workspace, src, embedder)
    assert changes.updated_in_place == [("finance/q1", changes.updated_in_place[0][1])] and changes.new == []
    assert report.embedded == 0
    assert seen_by(workspace, embedder, {"finance"}) == {"finance/q2", "finance/deep/audit", "ledger"}


def test_a_document_whose_own_acl_its_narrowed_folder_no_longer_allows_is_hidden_not_kept(tmp_path, embedder):
    """Its quarantine is a revocation: the audit group that lost the folder loses the document at the next publish,
    and it comes back (nothing embedded) once the folder allows it again."""
    src, workspace = source(tmp_path), tmp_path / "ws"
    (src / "finance" / "q1.md").write_text("---\nid: finance/q1\nacl: [audit]\n---\n" + TEXTS["finance/q1.md"] + "\n")
    publish(workspace, src, embedder)[0].close()
    assert "finance/q1" in seen_by(workspace, embedder, {"audit"})
    (src / "finance" / ACCESS_FILE).write_text("acl: [finance]\n")
    catalog, _, changes, _ = publish(workspace, src, embedder)
    assert [d for d, _ in changes.deleted] == ["finance/q1"]
    [reason] = [r.reason for r in changes.rejected if r.doc_id == "finance/q1"]
    assert reason == f"'acl' group 'audit' is not allowed by the folder ACL file {src / 'finance' / ACCESS_FILE}"
    catalog.close()
    assert seen_by(workspace, embedder, {"audit"}) == set()
    (src / "finance" / ACCESS_FILE).write_text("acl: [finance, audit]\n")
    catalog, _, changes, report = publish(workspace, src, embedder)
    current = {d for (d,) in catalog.rows("SELECT doc_id FROM documents WHERE status = 'current'")}
    assert "finance/q1" in current and report.embedded == 0
    catalog.close()
    assert "finance/q1" in seen_by(workspace, embedder, {"audit"})


def test_an_invalid_folder_file_over_a_whole_source_hides_its_documents_rather_than_keeping_them(tmp_path, embedder):
    src, workspace = source(tmp_path), tmp_path / "ws"
    (src / ACCESS_FILE).write_text("acl: [staff, finance, audit]\n")
    publish(workspace, src, embedder)[0].close()
    (src / ACCESS_FILE).write_text("acl: []\n")
    catalog, _, changes, _ = publish(workspace, src, embedder)
    assert len(changes.deleted) == 5 and all(r.reason.startswith(f"folder ACL file {src / ACCESS_FILE}: ")
                                             for r in changes.rejected)
    catalog.close()
    assert seen_by(workspace, embedder, set(("staff", "finance", "audit"))) == set()
    catalog, _, again, _ = publish(workspace, src, embedder)   # nothing changed: still hidden, and the run is fine
    assert (again.new, again.deleted) == ([], [])
