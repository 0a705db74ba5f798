"""Shared by the hardening tests: write a corpus, run the three publishing steps on a real catalog and index."""
from pathlib import Path

from rag.catalog import Catalog
from rag.index import SubchunkIndex
from rag.publish import IngestSettings, publish_documents, publish_index, publish_units
from rag.tokens import default_counter

GOOD = "---\nid: {id}\nversion: \"{version}\"\nacl: [{acl}]\n---\n# {id}\n\n{text}\n"


def write(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def good(doc_id: str, text: str = "Plain body text.", version: str = "1", acl: str = "support") -> str:
    return GOOD.format(id=doc_id, version=version, acl=acl, text=text)


def publish_all(workspace: Path, sources, embed, **settings):
    """Documents, units and index in one go; returns the open catalog and index."""
    catalog, index = Catalog(workspace / "catalog.duckdb"), SubchunkIndex(workspace / "lancedb")
    run = IngestSettings(sources=[str(s) for s in sources], **settings)
    changes, _ = publish_documents(catalog, run)
    publish_units(catalog, default_counter(), run)
    report = publish_index(catalog, index, embed, default_counter(), run)
    return catalog, index, changes, report


def current(catalog: Catalog) -> dict[str, tuple[str, tuple[str, ...]]]:
    """doc_id → (current version, ACL)."""
    return {d.doc_id: (d.version, d.acl) for d in catalog.current_documents()}
