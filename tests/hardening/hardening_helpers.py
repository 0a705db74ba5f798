"""Shared by the hardening tests: write a corpus, run the three publishing steps on a real catalog and index."""
from pathlib import Path

from rag.models.tokens import default_counter
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings

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


MARKER = "zq-hostile-marker"  # in every input that must never be served; in no sample document

HOSTILE_FILES = {
    "list-front-matter.md": f"---\n- acl: [everyone]\n---\n{MARKER} list\n",
    "unclosed.md": f"---\nacl: [support]\n{MARKER} unclosed\n",
    "bare-line.md": f"---\nacl everyone\n---\n{MARKER} bare line\n",
    "duplicate-acl.md": f"---\nacl: [security-team]\nacl: [everyone]\n---\n{MARKER} duplicate\n",
    "null-acl.md": f"---\nacl:\n---\n{MARKER} null\n",
    "upper-acl.md": f"---\nACL: [security-team]\n---\n{MARKER} upper\n",
    "acl-in-body.md": f"# Title\n\nacl: [security-team]\n\n{MARKER} body\n",
    "json-front-matter.md": f'{{\n"acl": ["x"], "acl": ["everyone"]\n}}\n{MARKER} json\n',
    "dash-line.md": f"--- acl: [security-team]\n{MARKER} dash\n",
}


def hostile_corpus(dest: Path, outside: Path) -> None:
    """Hostile front matter and links, all of which must be quarantined, added to a corpus folder."""
    for name, content in HOSTILE_FILES.items():
        write(dest / "hostile", name, content)
    secret = write(outside, "secret.md", f"---\nid: outside-secret\nacl: [everyone]\n---\n{MARKER} outside\n")
    (dest / "hostile" / "escape.md").symlink_to(secret)
    (dest / "hostile" / "escape-dir").symlink_to(outside, target_is_directory=True)
    (dest / "hostile" / "dangling.md").symlink_to(dest / "nowhere.md")
