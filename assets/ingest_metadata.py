"""What the ingest assets' metadata says, in words and tables narrow enough for the UI's 900 px metadata box.

A table puts the column a user reads first (the reason) first, keeps long text to that one column (which wraps),
and shortens file paths to the part below their source folder; the full paths stay in the catalog and the run's log.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import dagster as dg

from rag.sources.formats.registry import kind_of
from rag.store.storage import Storage
from rag.text.tables import markdown_table

TABLE_ROWS = 50     # rows a metadata table shows; the catalog's tables hold all
PATH_CHARS = 40     # a path cell longer than this keeps its tail: a path does not wrap in the UI
FIRST_RUN = "first run: nothing to replace"
SAME_EMBEDDER = "no (the same embedder as the last run)"
NOT_REPLACED = (FIRST_RUN, SAME_EMBEDDER)


def counts_line(changes, documents, current: dict[str, str]) -> str:
    """Why documents read and documents current differ, each kind of difference named with its count.

    `current` maps the read documents' ids to their current version in the catalog after this run.
    """
    refused = Counter((r.source_path, r.doc_id) for r in changes.rejected if r.doc_id)
    kinds: Counter = Counter()
    seen: set[tuple[str, str]] = set()
    for doc in documents:
        if refused[(doc.source_path, doc.doc_id)]:
            refused[(doc.source_path, doc.doc_id)] -= 1
            kinds["quarantined"] += 1
        elif (doc.doc_id, doc.version) in seen:
            kinds["copies"] += 1
        else:
            seen.add((doc.doc_id, doc.version))
            kinds["current" if current.get(doc.doc_id) == doc.version else "older"] += 1
    files = changes.reading.get("files_read", 0)
    parts = [f"{n} {label}" for n, label in (
        (kinds["current"], "current"),
        (kinds["older"], "older (kept for as-of reads)"),
        (kinds["quarantined"], "quarantined (a duplicate id with other text, or a refused version)"),
        (kinds["copies"], "identical copies of a version read twice (stored once)")) if n]
    read = (f"{_n(len(documents), 'document version')} read from {_n(files, 'new or changed file')}"
            + (f": {', '.join(parts)}" if parts else "") if documents or files
            else "No new or changed file since the last run, so no document was read")
    current_part = (f"{_n(changes.current, 'document')} current in the catalog: {kinds['current']} read in this run, "
                    f"{changes.current - kinds['current']} from unchanged files")
    other = len(changes.rejected) - kinds["quarantined"]
    others = (f". {other} other quarantined input{'s' if other != 1 else ''}: files not readable as documents, or "
              "refusals decided again from unchanged files" if other else "")
    return f"{read}. {current_part}{others}."


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def any_of(count: int, noun: str) -> str:
    """'its one collection', 'any of the 3 collections': a skip reason's words."""
    return f"its one {noun}" if count == 1 else f"any of the {count} {noun}s"


def quarantine_md(rejected, sources: list[str], served: dict[str, str] | None = None) -> str:
    """The inputs passed over: reason first, the file below its source folder, the last good version served."""
    if not rejected:
        return "Nothing quarantined."
    served = served or {}
    rows = [[_short_paths_in(r.reason, sources), short_path(r.source_path, sources),
             (f"{r.doc_id} v{served[r.doc_id]}" if r.doc_id in served else "")] for r in rejected[:TABLE_ROWS]]
    more = (f"\n\n…and {len(rejected) - TABLE_ROWS} more (see the catalog's `quarantine` table)."
            if len(rejected) > TABLE_ROWS else "")
    return markdown_table(["reason", "file", "last good version served"], rows) + more


def quarantine_line(r, served: dict[str, str]) -> str:
    last_good = f" (its last good version, v{served[r.doc_id]}, is still served)" if r.doc_id in served else ""
    return f"{r.source_path}: {r.reason}{last_good}"


def kinds_md(rejected) -> str:
    """Refused inputs counted by kind (encrypted, no text layer, zip bomb, …); 'other' for the text loaders' reasons."""
    kinds = Counter(kind_of(r.reason) for r in rejected)
    if not kinds:
        return "Nothing refused."
    return markdown_table(["kind", "inputs"], [[k, n] for k, n in kinds.most_common()])


def formats_md(formats) -> str:
    """Files, pages (slides, sheets) and reading seconds per format read in this run."""
    if not formats:
        return "No PDF, Office, HTML or e-mail file was read in this run."
    rows = [[suffix.lstrip("."), r.files, r.pages or "", f"{r.seconds:.2f}"] for suffix, r in sorted(formats.items())]
    return markdown_table(["format", "files", "pages, slides or sheets", "seconds"], rows)


def missing_links_md(missing: list[tuple[str, str]], partitioned: bool) -> str:
    """Each link that points to no document: the document that holds it, and the link as written."""
    if not missing:
        return "No link points to a missing document."
    where = " (in no collection of the sources)" if partitioned else ""
    rows = [[doc_id, link] for doc_id, link in sorted(missing)[:TABLE_ROWS]]
    more = f"\n\n…and {len(missing) - TABLE_ROWS} more (the run's log names each)." if len(missing) > TABLE_ROWS else ""
    return f"Links to a document not found{where}:\n\n" + markdown_table(["document", "missing link"], rows) + more


def embedder_replaced(replaced: str | None, first_run: bool) -> str:
    """The embedder whose index this run emptied, or why none was."""
    if replaced:
        return replaced
    return FIRST_RUN if first_run else SAME_EMBEDDER


def storage_table(stored: Storage) -> dg.TableMetadataValue:
    """Megabytes on disk per part of the store, and each part's size as a multiple of the raw text."""
    raw = max(stored.raw_text_bytes, 1)
    parts = (("catalog", stored.catalog_bytes), ("read state", stored.read_state_bytes),
             ("index", stored.index_bytes), ("total", stored.total()))
    return dg.MetadataValue.table(
        [dg.TableRecord({"part": name, "mb": round(n / 1e6, 2), "times_raw_text": round(n / raw, 2)})
         for name, n in parts],
        dg.TableSchema(columns=[
            dg.TableColumn("part", "string", "catalog (DuckDB), read state (published snapshot), index (LanceDB)"),
            dg.TableColumn("mb", "float", "megabytes (10^6 bytes) on disk"),
            dg.TableColumn("times_raw_text", "float", "bytes on disk ÷ UTF-8 bytes of the current documents' text")]))


def short_path(path: str, sources: list[str]) -> str:
    """The path below the source folder holding it (with that folder's name), its tail if still long."""
    shown = short_text(path, sources)
    if len(shown) <= PATH_CHARS:
        return shown
    tail = shown.rsplit("/", 1)[-1]
    for part in reversed(shown.split("/")[:-1]):   # whole folder names, as many as fit
        if len(part) + len(tail) + 3 > PATH_CHARS:
            break
        tail = f"{part}/{tail}"
    return "…/" + tail if len(tail) + 2 <= PATH_CHARS else "…" + tail[-(PATH_CHARS - 1):]


def _short_paths_in(text: str, sources: list[str]) -> str:
    """`text` with each path in it shortened as `short_path` does: a reason wraps at spaces, a path does not."""
    return " ".join(short_path(word, sources) if "/" in word else word for word in text.split(" "))


def short_text(text: str, sources: list[str]) -> str:
    """`text` with each source folder's full path written as the folder's name."""
    for source in sorted(sources, key=len, reverse=True):
        root = Path(source).resolve()
        text = text.replace(f"{root}/", f"{root.name}/")
    return text
