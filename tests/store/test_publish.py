"""Publishing embeds each distinct text once: across runs (the cache) and within a run (duplicates)."""
from rag.models.tokens import default_counter
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings


def write(folder, doc_id, text, acl="support"):
    (folder / f"{doc_id}.md").write_text(f"---\nid: {doc_id}\ntitle: Shared boilerplate\nacl: [{acl}]\n---\n{text}\n")


def publish(catalog, index, settings, embedder):
    publish_documents(catalog, settings)
    publish_units(catalog, default_counter(), settings)
    return publish_index(catalog, index, embedder.encode, default_counter(), settings)


def test_identical_texts_in_one_run_are_embedded_once(tmp_path, embedder):
    src = tmp_path / "src"
    src.mkdir()
    boilerplate = "Every gateway must be grounded before power is applied. Use a 6 mm² conductor."
    for i in range(3):
        write(src, f"site-{i}", boilerplate, acl=f"team-{i}")  # three ACLs: three units, same text
    write(src, "other", "The antenna mast needs a lightning arrester.")
    catalog, index = Catalog(tmp_path / "c.duckdb"), SubchunkIndex(tmp_path / "lance")
    report = publish(catalog, index, IngestSettings(sources=[str(src)]), embedder)
    assert report.subchunks == 4 and report.embedded == 2 and report.reused == 2
    data, vectors = index.rows(["doc_id"])
    by_doc = dict(zip(data.column("doc_id").to_pylist(), vectors.to_pylist()))
    assert by_doc["site-0"] == by_doc["site-1"] == by_doc["site-2"] != by_doc["other"]
