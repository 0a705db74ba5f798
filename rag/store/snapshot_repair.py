"""The writer's repair of a damaged published state (rag.store.snapshot_files), before anything builds on it.

A lost or damaged pointer, manifest or segment never stops the writer: the segments that are whole (those the newest
intact manifest names, then those later publishes wrote, in order) are published again with the catalog's changes
since, as a new publish. Current rows are the catalog's, so none is lost; history only a damaged segment held is
gone with it. Readers go on refusing the damaged state in one line until this publish replaces it.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import duckdb

from rag.store.snapshot_files import (
    POINTER,
    READ_TABLES,
    SEGMENT_DIR,
    SNAPSHOT_DIR,
    NoSnapshot,
    manifest_tables,
    publish_snapshot,
    read_pointer,
)

MAGIC = b"PAR1"  # a Parquet file starts and ends with it: a file emptied, cut short or overwritten lacks one
_LOG = logging.getLogger("rag.store")


def whole_parquet(path: Path) -> bool:
    """Whether the file is there with both its Parquet magic numbers (not deleted, emptied, truncated, garbage)."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size < 12 or f.read(4) != MAGIC:
                return False
            f.seek(-4, os.SEEK_END)
            return f.read(4) == MAGIC
    except OSError:
        return False


def repair_published(con: duckdb.DuckDBPyConnection, catalog_path: str | Path) -> list[str]:
    """Publish the store afresh if its pointer, the manifest it names or a segment that lists is lost or damaged;
    one line per damage found (none: nothing was written)."""
    folder = Path(catalog_path).parent / SNAPSHOT_DIR
    if not folder.is_dir():
        return []
    try:
        info = read_pointer(folder.parent)
    except NoSnapshot:
        info = None
    if info is not None and not info.file.endswith(".json"):
        return []   # a whole-catalog copy (the format before segments): the next publish replaces it
    named = manifest_tables(folder / info.file) if info is not None else {}
    damage = [] if info is not None else [f"{SNAPSHOT_DIR}/{POINTER} is lost or unreadable"]
    if info is not None and not named:
        damage.append(f"{SNAPSHOT_DIR}/{info.file} (named by {SNAPSHOT_DIR}/{POINTER}) is lost or unreadable")
    if not damage:
        damage = [f"{SNAPSHOT_DIR}/{SEGMENT_DIR}/{f} is lost or damaged" for f in _segments(named)
                  if not whole_parquet(folder / SEGMENT_DIR / f)]
    if not damage or (info is None and not _published_files(folder)):
        return []
    seq, tables = rebuilt(folder, info.seq if info else 0)
    # The pointer's index version, or the one the last publish whose index step finished left.
    (publish_id, synced), = con.execute("SELECT coalesce(max(publish_id) FILTER (status = 'published'), 0), "
                                        "arg_max(lance_version, publish_id) FILTER (index_synced) FROM publish_log"
                                        ).fetchall()
    publish_snapshot(con, catalog_path, publish_id, info.lance_version if info else synced, base=(seq, tables))
    for line in damage:
        _LOG.warning("%s: %s; published again from the catalog and the segments that are whole", folder.parent, line)
    return damage


def rebuilt(folder: Path, seq: int = 0) -> tuple[int, dict[str, list[str]]]:
    """The newest seq any file of the store (or `seq`) carries, and each table's whole segments up to it: the newest
    intact manifest's, then every later one in the order its publish wrote it (a merged one after its table's base)."""
    manifests = sorted((int(p.stem), manifest_tables(p)) for p in folder.glob("*.json") if p.stem.isdigit())
    intact = [(s, t) for s, t in manifests if t]
    since, tables = intact[-1] if intact else (0, {})
    tables = {t: list(files) for t, files in tables.items() if t != "texts"}
    newest = max([seq, since, *(s for s, _ in manifests)])
    later = sorted(p.name for p in (folder / SEGMENT_DIR).glob("*.parquet") if p.name[:8].isdigit()
                   and int(p.name[:8]) > since and not p.name[9:].startswith("texts-"))
    for name in later:
        at, (table, merged) = int(name[:8]), _kind(name)
        if table not in READ_TABLES or (not merged and f"{at:08d}-{table}-merged.parquet" in later):
            continue   # a segment a merge of its own publish replaced
        newest = max(newest, at)
        files = tables.setdefault(table, [])
        tables[table] = files[:1] + [name] if merged else files + [name]
    whole = {t: [f for f in files if whole_parquet(folder / SEGMENT_DIR / f)] for t, files in tables.items()}
    return newest, whole


def _kind(name: str) -> tuple[str, bool]:
    """A segment's table and whether it is a merge: `NNNNNNNN-<table>[-merged].parquet`."""
    stem = name[9:-len(".parquet")]
    return stem.removesuffix("-merged"), stem.endswith("-merged")


def _segments(tables: dict[str, list[str]]) -> list[str]:
    return [f for table, files in tables.items() if table != "texts" for f in files]


def _published_files(folder: Path) -> bool:
    return any(p.stem.isdigit() for p in folder.glob("*.json")) or any((folder / SEGMENT_DIR).glob("*.parquet"))
