"""Recording what the sources hold now: versions reconciled over the ids a change touched, in one transaction.

Only files whose stat or content changed are read (see rag.sources.scan). The ids a change touches are those of
the records that changed or went away, plus the ids refused at the last run and the ids whose current version no
file holds any more (its deletion, or an older version's return, may have been held back): everything else is as
the last run left it, so `reconcile_versions` over the touched ids decides what it would decide over all of them.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import pyarrow as pa

from rag.sources.access import AccessOptions
from rag.sources.documents import Document, LoadResult
from rag.sources.formats import ExtractOptions
from rag.sources.loaders import _load_files, jsonl_lines, jsonl_record
from rag.sources.partitions import Selection
from rag.sources.scan import FileState, ReadAs, Record, Scan, scan_sources
from rag.sources.versions import VersionPlan, dated, reconcile_versions
from rag.store.catalog import Catalog, utc_now
from rag.store.catalog_documents import source_records
from rag.store.rows import DocChanges

# A record's ACL, links and collection are not stored: a version is inserted or updated from its file, read again.
_RECORD_COLUMNS = ("file", "source", "position", "line_hash", "source_path", "doc_id", "version", "content_hash",
                   "meta_hash", "reason", "holds", "empty", "withheld")
_RECORD_SCHEMA = pa.schema([(c, pa.int32() if c == "position" else pa.bool_() if c in ("empty", "withheld") else
                             pa.string())
                            for c in _RECORD_COLUMNS])
_STATE_COLUMNS = ("path", "source", "root", "size", "mtime_ns", "ctime_ns", "ino", "content_hash", "settings",
                  "checked_ns")


class SourceChanged(RuntimeError):
    """A file changed between the run's listing and its reading of a document it needed."""


@dataclass
class SourceView:
    """The sources as this run sees them: what it read, and what unchanged files still hold."""

    scan: Scan
    default_acl: tuple[str, ...]
    collection: str | None
    removed: list[str] = field(default_factory=list)
    kept_rejections: list[Record] = field(default_factory=list)   # of files not read anew
    holding: set[str] = field(default_factory=set)   # sources that hold any document
    options: ExtractOptions = ExtractOptions()        # how PDF and Office files were read (OCR or not)
    access: AccessOptions = AccessOptions()           # where the folder ACL files start

    @property
    def stale(self) -> list[str]:
        """Files whose stored records are replaced (read anew) or dropped (gone)."""
        return sorted(set(self.scan.changed) | set(self.removed))

    def loaded(self) -> LoadResult:
        """What this run parsed, every rejection (read now or still standing) and every skip."""
        fresh = [r for recs in self.scan.changed.values() for r in recs if not r.is_document]
        order = {path: n for n, path in enumerate(self.scan.states)}   # the listing's order, as a full read has it
        standing = sorted(fresh + self.kept_rejections, key=lambda r: (order.get(r.file, len(order)), r.position))
        return LoadResult(documents=list(self.scan.parsed.values()),
                          rejected=self.scan.passed_over.rejected + [r.rejected() for r in standing],
                          skipped=self.scan.passed_over.skipped, scanned=self.scan.scanned,
                          warnings=self.scan.warnings, formats=self.scan.formats)

    def reading(self) -> dict[str, int]:
        changed = set(self.scan.changed)
        return {"files_read": len(changed), "files_unchanged": len(set(self.scan.states) - changed),
                "files_removed": len(self.removed), "lines_parsed": self.scan.lines_parsed}


def read_sources(catalog: Catalog, sources: list[str], default_acl: tuple[str, ...], collection: str | None,
                 rescan: bool = False, select: Selection | None = None,
                 options: ExtractOptions = ExtractOptions()) -> SourceView:
    """List the sources (only a partition's files with `select`), read what changed since the catalog's last
    reading, and gather what still stands."""
    known = _states(catalog)
    scan = scan_sources(sources, ReadAs(default_acl, collection, options), known,
                        lambda files: _records(catalog, files), rescan, select)
    view = SourceView(scan, default_acl, collection, options=options, access=AccessOptions.of(select, options.acl_from))
    scanned = set(scan.scanned)
    view.removed = sorted(p for p, st in known.items() if st.source in scanned and p not in scan.states)
    keep = _kept()
    view.kept_rejections = [_record(r) for r in catalog.rows(
        f"SELECT {', '.join(_RECORD_COLUMNS)} FROM {source_records(f'reason IS NOT NULL AND {keep}')} r "
        "ORDER BY file, position", [scan.scanned, view.stale])]
    # A withheld document's source was read and holds it: its deletion (a revocation) is not an emptied source's.
    view.holding = {r.source for recs in scan.changed.values() for r in recs if r.is_document or r.withheld}
    view.holding |= {s for (s,) in catalog.rows(
        f"SELECT DISTINCT source FROM source_records WHERE (reason IS NULL OR withheld) AND {keep}",
        [scan.scanned, view.stale])}
    return view


def sync_sources(catalog: Catalog, publish_id: int, view: SourceView, allow_empty: bool, rescan: bool = False
                 ) -> DocChanges:
    """Reconcile the touched ids (every id with `rescan`) and store the new file states and records with them."""
    scan = view.scan
    textless = catalog.texts.textless()   # their text file was lost: read again from their unchanged files
    touched = None if rescan else _touched(catalog, view) | {d for d, _ in textless}
    fresh = [r for recs in scan.changed.values() for r in recs
             if r.is_document and (touched is None or r.doc_id in touched)]
    loaded: list = [scan.parsed.get((r.file, r.position), r) for r in fresh]
    if touched is not None:
        loaded += [_record(r) for r in catalog.rows(
            f"SELECT {', '.join(_RECORD_COLUMNS)} FROM "
            f"{source_records(f'reason IS NULL AND {_kept()} AND doc_id IN (SELECT unnest(?::VARCHAR[]))')} r",
            [scan.scanned, view.stale, sorted(touched)])]
    existing, dropped = known_versions(catalog, None if touched is None else sorted(touched))
    plan = reconcile_versions(existing, loaded, view.loaded().rejected, scan.scanned, allow_empty, view.holding)
    plan.warnings = scan.warnings + plan.warnings
    plan.insert = _documents(plan.insert, view)
    plan.update_meta = _documents(plan.update_meta, view)
    lost = catalog.missing_texts({k: existing[k][0] for k in (set(plan.make_current) | textless) - {
        (d.doc_id, d.version) for d in plan.insert}})
    back = _documents([i for i in loaded if (i.doc_id, i.version) in lost], view) if lost else []
    changes = apply_versions(catalog, publish_id, plan, lambda: _store(catalog, view), back, dropped)
    catalog.texts.forget_lost()
    changes.reading = view.reading()
    return changes


def _touched(catalog: Catalog, view: SourceView) -> set[str]:
    scan = view.scan
    ids: set[str] = set()
    for file, now in scan.changed.items():
        old = {_identity(r) for r in scan.before.get(file, [])}
        new = {_identity(r) for r in now}
        ids |= {r.doc_id for r in now if _identity(r) not in old and r.doc_id}
        ids |= {r.doc_id for r in scan.before.get(file, []) if _identity(r) not in new and r.doc_id}
    ids |= {d for (d,) in catalog.rows(
        "SELECT DISTINCT doc_id FROM source_records WHERE doc_id IS NOT NULL AND file IN (SELECT unnest(?::VARCHAR[]))",
        [view.removed])}
    # Refusals are decided against the catalog, not the file alone: the ids refused last time are asked again.
    ids |= {d for (d,) in catalog.rows(
        "SELECT DISTINCT doc_id FROM quarantine WHERE severity = 'rejected' AND doc_id IS NOT NULL AND publish_id = "
        "(SELECT max(publish_id) FROM publish_log WHERE documents_new IS NOT NULL)")}
    # By version, not id: a current version gone while a file still holds an older one (which may be current again)
    # is touched, also at a later run that lifts what held the change back (a rejected input that may carry it).
    fresh = {(r.doc_id, r.version) for recs in scan.changed.values() for r in recs if r.is_document}
    ids |= {d for d, _ in set(catalog.rows(
        "SELECT d.doc_id, d.version FROM documents d WHERE d.status = 'current' AND "
        "d.source IN (SELECT unnest(?::VARCHAR[])) AND NOT EXISTS (SELECT 1 FROM source_records r WHERE "
        f"r.doc_id = d.doc_id AND r.version = d.version AND r.reason IS NULL AND {_kept('r.')})",
        [scan.scanned, scan.scanned, view.stale])) - fresh}
    return ids


def _identity(r: Record) -> tuple:
    return r.position, r.line_hash, r.source_path, r.source, r.meta_hash


def _kept(prefix: str = "") -> str:
    """SQL: a stored record of an unchanged file of a scanned source (parameters: scanned, stale)."""
    return (f"{prefix}source IN (SELECT unnest(?::VARCHAR[])) AND {prefix}file NOT IN (SELECT unnest(?::VARCHAR[]))")


def _documents(items: list, view: SourceView) -> list[Document]:
    """The documents to insert or update in place: a record kept from an earlier reading is read again from its
    file (the catalog keeps no copy of its ACL, links or collection)."""
    wanted: dict[str, list[Record]] = defaultdict(list)
    for item in items:
        if isinstance(item, Record):
            wanted[item.file].append(item)
    read: dict[tuple[str, int], Document] = {}
    for file, records in wanted.items():
        state, path = view.scan.states[file], Path(file)
        if path.suffix == ".jsonl":
            positions = {r.position for r in records}
            outcomes = {n: jsonl_record(path, n, line, view.default_acl, view.collection, Path(state.root), view.access)
                        for n, line in jsonl_lines(path) if n in positions}
        else:
            outcomes = {0: d for d in _load_files([path], Path(state.root), view.default_acl, view.collection,
                                                  view.options, view.access).documents}
        for r in records:
            doc = outcomes.get(r.position)
            if not isinstance(doc, Document) or (doc.doc_id, doc.content_hash) != (r.doc_id, r.content_hash) or (
                    doc.version != r.version and not dated(r)):
                raise SourceChanged(f"{r.source_path}: changed while the run was reading it; run the ingest again")
            read[(file, r.position)] = replace(doc, source=r.source, source_path=r.source_path, version=r.version)
    return [read[(i.file, i.position)] if isinstance(i, Record) else i for i in items]


def _store(catalog: Catalog, view: SourceView) -> None:
    """Replace the states and records of the files read anew or gone (inside the version plan's transaction)."""
    scan = view.scan
    written = sorted(set(scan.changed) | set(scan.restated))
    states = [scan.states[p] for p in written]
    records = [r for recs in scan.changed.values() for r in recs]
    catalog.replace_source_files(sorted(set(written) | set(view.removed)),
                                 {c: [getattr(s, c) for s in states] for c in _STATE_COLUMNS}, view.stale,
                                 pa.table({c: [getattr(r, c) for r in records] for c in _RECORD_COLUMNS},
                                          schema=_RECORD_SCHEMA))


def _states(catalog: Catalog) -> dict[str, FileState]:
    return {r[0]: FileState(*r) for r in catalog.rows(f"SELECT {', '.join(_STATE_COLUMNS)} FROM source_files")}


def _records(catalog: Catalog, files: list[str]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = defaultdict(list)
    if files:
        for row in catalog.rows(f"SELECT {', '.join(_RECORD_COLUMNS)} FROM "
                                f"{source_records('file IN (SELECT unnest(?::VARCHAR[]))')} r ORDER BY file, position",
                                [files]):
            out[row[0]].append(_record(row))
    return out


def _record(row: tuple) -> Record:
    return Record(**dict(zip(_RECORD_COLUMNS, row)))


def sync_documents(catalog: Catalog, publish_id: int, loaded: list[Document], rejected: list,
                   scanned_sources: list[str], allow_empty: bool = False) -> DocChanges:
    """Record a full reading of the sources: new versions, supersessions and deletions, in one transaction."""
    existing, dropped = known_versions(catalog)
    plan = reconcile_versions(existing, loaded, rejected, scanned_sources, allow_empty)
    current = set(plan.make_current)
    return apply_versions(catalog, publish_id, plan, None, [d for d in loaded if (d.doc_id, d.version) in current],
                          dropped)


def known_versions(catalog: Catalog, doc_ids: list[str] | None = None
                   ) -> tuple[dict[tuple[str, str], tuple], set[tuple[str, str]]]:
    """Every version of these ids (or all) the catalog knows: its own rows and the ones it dropped once published
    (`Catalog.published_versions`), and which are the dropped ones."""
    dropped = catalog.published_versions(doc_ids)
    return {**existing_versions(catalog, doc_ids), **dropped}, set(dropped)


def existing_versions(catalog: Catalog, doc_ids: list[str] | None = None) -> dict[tuple[str, str], tuple]:
    """(doc_id, version) → (content hash, meta hash, status, source, source path), for these ids or all."""
    where, params = ("WHERE doc_id IN (SELECT unnest(?::VARCHAR[]))", [doc_ids]) if doc_ids is not None else ("", [])
    return {(d, v): (h, m, s, src, path) for d, v, h, m, s, src, path in catalog.rows(
        f"SELECT doc_id, version, content_hash, meta_hash, status, source, {catalog.source_path_sql} FROM documents "
        f"{where}",
        params)}


def apply_versions(catalog: Catalog, publish_id: int, plan: VersionPlan, also: Callable[[], None] | None = None,
                   back: list[Document] = (), dropped: set[tuple[str, str]] = frozenset()) -> DocChanges:
    """Write a version plan (and `also`'s writes) in one transaction; `back` are versions made current again
    whose text was dropped (past the as-of retention): their texts are stored again. A `dropped` version the plan
    changes gets its published row back first."""
    now = utc_now()
    with catalog.transaction():
        catalog.restore_documents(sorted(dropped & {*plan.make_current, *((d.doc_id, d.version) for d in
                                                                          plan.update_meta)}))
        new = plan.insert
        catalog.store_texts(list(back))
        catalog.insert_documents({
            **{c: [getattr(d, c) for d in new] for c in ("doc_id", "version", "title", "text", "collection", "source",
                                                         "source_path", "content_hash", "meta_hash")},
            "acl": [list(d.acl) for d in new], "links": [list(d.links) for d in new],
            "status": ["superseded"] * len(new), "publish_id": [publish_id] * len(new)})
        meta = plan.update_meta
        catalog.log_acl_changes(publish_id, meta, now)
        catalog.update_documents({
            **{c: [getattr(d, c) for d in meta] for c in ("doc_id", "version", "collection", "source", "source_path",
                                                           "meta_hash")},
            "acl": [list(d.acl) for d in meta], "links": [list(d.links) for d in meta]})
        for status, keys in (("superseded", plan.supersede), ("deleted", plan.delete)):
            catalog.update_documents({"doc_id": [d for d, _ in keys], "version": [v for _, v in keys],
                                      "status": [status] * len(keys), "valid_to": [now] * len(keys)})
        made = plan.make_current
        catalog.update_documents({
            "doc_id": [d for d, _ in made], "version": [v for _, v in made], "status": ["current"] * len(made),
            "valid_from": [now] * len(made), "valid_to": pa.nulls(len(made), pa.timestamp("us")),
            "publish_id": [publish_id] * len(made)})
        catalog.record_problems(publish_id, "rejected", plan.rejected)
        catalog.record_problems(publish_id, "warning", plan.warnings)
        catalog.count_documents(publish_id, len(plan.insert), len(plan.supersede), len(plan.delete))
        if also:
            also()
    (current,), = catalog.rows("SELECT count(*) FROM documents WHERE status = 'current'")
    return DocChanges(new=[(d.doc_id, d.version) for d in plan.insert], superseded=plan.supersede,
                      deleted=plan.delete, updated_in_place=[(d.doc_id, d.version) for d in plan.update_meta],
                      rejected=plan.rejected, current=current, warnings=plan.warnings)

