"""Version reconciliation: what the sources hold now against what the catalog has published."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from rag.sources.documents import Document, Rejected, UnorderableVersion, source_file, version_key, version_order
from rag.sources.formats.registry import READERS


class Published(NamedTuple):
    content_hash: str
    meta_hash: str
    status: str
    source: str
    source_path: str


# (doc_id, version) → what the catalog holds for that version
Existing = dict[tuple[str, str], tuple[str, str, str, str, str]]


@dataclass
class VersionPlan:
    insert: list[Document] = field(default_factory=list)
    update_meta: list[Document] = field(default_factory=list)
    make_current: list[tuple[str, str]] = field(default_factory=list)
    supersede: list[tuple[str, str]] = field(default_factory=list)
    delete: list[tuple[str, str]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    warnings: list[Rejected] = field(default_factory=list)


@dataclass
class _Protection:
    """What this run's rejected inputs may carry: none of it is deleted (a bad edit never loses a document)."""

    ids: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)
    files: dict[str, Rejected] = field(default_factory=dict)

    @classmethod
    def of(cls, rejected: list[Rejected], allow_empty: bool) -> "_Protection":
        p = cls()
        for r in rejected:
            if (r.empty and allow_empty) or r.withheld:
                continue
            if r.doc_id:
                p.ids.add(r.doc_id)
            p.paths.add(r.source_path)
            if r.holds:
                p.files.setdefault(r.holds, r)
        return p

    def covers(self, doc_id: str, row: Published) -> bool:
        return doc_id in self.ids or row.source_path in self.paths or source_file(row.source_path) in self.paths

    def holder(self, row: Published) -> Rejected | None:
        return self.files.get(source_file(row.source_path))


def reconcile_versions(existing: Existing, loaded: list[Document], rejected: list[Rejected],
                       scanned_sources: list[str], allow_empty: bool = False,
                       sources_with_documents: set[str] | None = None) -> VersionPlan:
    """Decide every document's current version: one per id, the newest the sources hold.

    A changed text needs a newer label; a new label older than the current one, or ordering the same as a
    different label, is refused; a newer label supersedes. A document gone from a scanned source is
    deleted, unless a rejected input may carry it, or its source holds no document at all and empty
    sources are not allowed.

    `existing` and `loaded` may be limited to the ids a change touched; `sources_with_documents` then says
    which sources hold any document at all (by default: the sources of `loaded`).
    """
    existing = {k: Published(*row) for k, row in existing.items()}
    plan = VersionPlan(rejected=list(rejected))
    current = {d: v for (d, v), row in existing.items() if row.status == "current"}
    orders: dict[str, dict[tuple, str]] = defaultdict(dict)
    for d, v in existing:
        try:
            orders[d][version_order(v)] = v
        except UnorderableVersion:
            pass
    by_id: dict[str, dict[str, Document]] = defaultdict(dict)
    for doc in _deduplicate(loaded, plan.rejected):
        cur = current.get(doc.doc_id)
        if cur and doc.version != cur and dated(doc) and existing[(doc.doc_id, cur)].content_hash == doc.content_hash:
            doc = replace(doc, version=cur)   # touched, not changed (a copy, a restore): still the current version
        by_id[doc.doc_id][doc.version] = doc
    protect = _Protection.of(plan.rejected, allow_empty)
    scanned = set(scanned_sources)
    held: dict[tuple[str, str], list[str]] = defaultdict(list)   # (path, reason) → ids kept as they are

    for doc_id, versions in sorted(by_id.items()):
        cur = current.get(doc_id)
        accepted: list[str] = []
        for version, doc in sorted(versions.items(), key=lambda kv: version_key(kv[0])):
            row = existing.get((doc_id, version))
            reason = _refusal(doc, row, cur, orders[doc_id])
            if reason:
                plan.rejected.append(_refuse(doc, reason))
                protect.ids.add(doc_id)
                continue
            accepted.append(version)
            if not row:
                plan.insert.append(doc)
                orders[doc_id][version_order(version)] = version
            elif row.meta_hash != doc.meta_hash or row.source != doc.source or row.source_path != doc.source_path:
                plan.update_meta.append(doc)
        if not accepted:
            continue
        top = max(accepted, key=version_key)
        if cur is None:
            plan.make_current.append((doc_id, top))
        elif version_key(top) > version_key(cur):
            plan.make_current.append((doc_id, top))
            plan.supersede.append((doc_id, cur))
        elif (top != cur and cur not in versions and existing[(doc_id, cur)].source in scanned
              and not protect.covers(doc_id, existing[(doc_id, cur)])):
            # The current version's input is gone and an older version the catalog holds is still in the
            # sources: that older version is current again, unless an unreadable record may still hold it.
            if holder := protect.holder(existing[(doc_id, cur)]):
                held[_held_by(holder)].append(doc_id)
            else:
                plan.make_current.append((doc_id, top))
                plan.delete.append((doc_id, cur))

    holding = {d.source for d in loaded} if sources_with_documents is None else sources_with_documents
    for key, ids in _deletions(plan, existing, by_id, protect, scanned_sources, holding, allow_empty).items():
        held[key] += ids
    plan.warnings += [Rejected(path, f"{reason}: {', '.join(sorted(ids)[:5])}{' …' if len(ids) > 5 else ''}")
                      for (path, reason), ids in held.items()]
    return plan


def _held_by(holder: Rejected) -> tuple[str, str]:
    return holder.holds, f"deletions held back: {holder.source_path} could not be read and may hold them"


def dated(item) -> bool:
    """Versioned by the file's modification time: a PDF, Office, HTML or e-mail file has no front matter."""
    return Path(source_file(item.source_path)).suffix.lower() in READERS


def _refusal(doc: Document, row: Published | None, cur: str | None, orders: dict[tuple, str]) -> str | None:
    """Why this version of a document cannot be accepted, if it cannot."""
    if row:
        if row.content_hash != doc.content_hash:
            return (f"text of '{doc.doc_id}' version {doc.version} changed but the version label did not; give the "
                    "new text a newer version")
        return None
    try:
        order = version_order(doc.version)
    except UnorderableVersion as err:
        return str(err)
    if order in orders:
        return (f"version {doc.version} of '{doc.doc_id}' orders the same as its version {orders[order]}; use one "
                "spelling of a label")
    if cur is not None and version_key(doc.version) < version_key(cur):
        return f"version {doc.version} of '{doc.doc_id}' is older than the published version {cur}"
    return None


def _deletions(plan: VersionPlan, existing: dict[tuple[str, str], Published], by_id: dict, protect: _Protection,
               scanned_sources: list[str], loaded_sources: set[str], allow_empty: bool
               ) -> dict[tuple[str, str], list[str]]:
    """Delete current documents gone from a scanned source, except what a rejected input or an empty source keeps;
    returns the ids kept, by (path, reason)."""
    scanned = set(scanned_sources)
    held: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (doc_id, version), row in sorted(existing.items()):
        if row.status != "current" or row.source not in scanned or doc_id in by_id or protect.covers(doc_id, row):
            continue
        if row.source not in loaded_sources and not allow_empty:
            held[(row.source, "the source holds no readable document, so its published documents are kept "
                              "(allow empty sources to delete them)")].append(doc_id)
        elif holder := protect.holder(row):
            held[_held_by(holder)].append(doc_id)
        else:
            plan.delete.append((doc_id, version))
    return held


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
