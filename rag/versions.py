"""Version reconciliation: what the sources hold now against what the catalog has published."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from rag.documents import Document, Rejected, version_key

# (doc_id, version) → (content_hash, meta_hash, status, source, source_path)
Existing = dict[tuple[str, str], tuple[str, str, str, str, str]]


@dataclass
class VersionPlan:
    insert: list[Document] = field(default_factory=list)
    update_meta: list[Document] = field(default_factory=list)
    make_current: list[tuple[str, str]] = field(default_factory=list)
    supersede: list[tuple[str, str]] = field(default_factory=list)
    delete: list[tuple[str, str]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


def reconcile_versions(existing: Existing, loaded: list[Document], rejected: list[Rejected],
                       scanned_sources: list[str]) -> VersionPlan:
    """Decide every document's current version; one current version per id, the newest the sources hold.

    A changed text needs a newer version label; an older label than the published one is refused; a
    document gone from a scanned source is deleted, unless its file was rejected this run (nothing
    already published is lost to a bad edit).
    """
    plan = VersionPlan(rejected=list(rejected))
    current = {d: v for (d, v), row in existing.items() if row[2] == "current"}
    protected_paths = {r.source_path for r in rejected}
    protected_ids = {r.doc_id for r in rejected if r.doc_id}
    by_id: dict[str, dict[str, Document]] = defaultdict(dict)
    for doc in _deduplicate(loaded, plan.rejected):
        by_id[doc.doc_id][doc.version] = doc

    for doc_id, versions in sorted(by_id.items()):
        cur = current.get(doc_id)
        refused: set[str] = set()
        for version, doc in sorted(versions.items(), key=lambda kv: version_key(kv[0])):
            row = existing.get((doc_id, version))
            if row and row[0] != doc.content_hash:
                plan.rejected.append(_refuse(doc, f"text of '{doc_id}' version {version} changed but the version "
                                                  "label did not; give the new text a newer version"))
                refused.add(version)
                del versions[version]
            elif not row and cur and cur in versions and version_key(version) < version_key(cur):
                plan.rejected.append(_refuse(doc, f"version {version} of '{doc_id}' is older than the published "
                                                  f"version {cur}"))
                del versions[version]
            elif not row:
                plan.insert.append(doc)
            elif row[1] != doc.meta_hash or row[3] != doc.source or row[4] != doc.source_path:
                plan.update_meta.append(doc)
        if not versions:
            continue
        top = max(versions, key=version_key)
        held = cur is not None and (cur in refused or existing[(doc_id, cur)][4] in protected_paths)
        if held and version_key(top) < version_key(cur):
            continue  # a bad edit of the current version never rolls the document back
        if top != cur:
            plan.make_current.append((doc_id, top))
            if cur:
                gone = cur not in versions and version_key(cur) > version_key(top)
                (plan.delete if gone else plan.supersede).append((doc_id, cur))

    scanned = set(scanned_sources)
    for (doc_id, version), (_, _, status, source, path) in sorted(existing.items()):
        if (status == "current" and source in scanned and doc_id not in by_id
                and doc_id not in protected_ids and path not in protected_paths):
            plan.delete.append((doc_id, version))
    return plan


def _deduplicate(loaded: list[Document], rejected: list[Rejected]) -> list[Document]:
    """One document per (id, version): identical copies collapse, a conflicting copy is refused."""
    first: dict[tuple[str, str], Document] = {}
    for doc in sorted(loaded, key=lambda d: (d.doc_id, version_key(d.version), d.source_path)):
        key = (doc.doc_id, doc.version)
        if key not in first:
            first[key] = doc
        elif first[key].content_hash != doc.content_hash:
            rejected.append(_refuse(doc, f"duplicate document id '{doc.doc_id}' (version {doc.version}) with "
                                         f"different content; first seen in {first[key].source_path}"))
    return list(first.values())


def _refuse(doc: Document, reason: str) -> Rejected:
    return Rejected(doc.source_path, reason, doc.doc_id)
