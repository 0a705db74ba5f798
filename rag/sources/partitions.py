"""Collections as partitions: which files a partition reads, and the store (catalog, lock, index) it writes alone.

A source folder's sub-folders are its collections, and its top-level files form one more collection named after
the source. A collection with more files than `shard_files` when first seen is split into a power of two of
hash shards, fixed from then on (`partitions/layout.json`), so growth never moves a file to another shard.
Each partition writes only its own store, so partitions never contend; readers see the union of all stores.
Where pods share no disk, a `Mirror` (rag.store.bucket_view) keeps these files in object storage: planning reads
the bucket's layout and stores first, and every file written here is copied there.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from rag.sources.partition_keys import MAX_KEY_CHARS, PartitionError, check_key, listing, show_key  # noqa: F401

PARTITIONS_DIR = "partitions"
LAYOUT = "layout.json"
STORE_INFO = "partition.json"
_SHARD = re.compile(r"^(?P<name>.+)~(?P<k>\d+)of(?P<n>\d+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_LOG = logging.getLogger("rag.store")
_WARNED: set[str] = set()


def default_shard_files() -> int:
    """Files a collection may hold when first seen before it is hash-sharded: $RAG_SHARD_FILES or 20,000."""
    return int(os.environ.get("RAG_SHARD_FILES", "20000"))


class Mirror(Protocol):
    """Another place that holds the workspace's partition files (the layout, each store's file and pointer)."""

    def refresh(self, workspace: Path, slugs: list[str] | None) -> None: ...   # bring them (these stores') here
    def wrote(self, workspace: Path, relative: str) -> None: ...   # copy a file just written in the folder there


MIRRORS: list[Mirror] = []   # rag.store adds the bucket's, when $RAG_SNAPSHOT_URI names one


def _refresh(workspace: str | Path | None, key: str | None = None) -> None:
    """The layout and every store's files, or only `key`'s store's (a run plans its own partition alone)."""
    for mirror in MIRRORS if workspace is not None else []:
        mirror.refresh(Path(workspace), None if key is None else [slug(key)])


@dataclass(frozen=True)
class Selection:
    """Which files of a source folder one partition reads: only the top level, and/or one hash shard."""

    top_level_only: bool = False
    shard: tuple[int, int] | None = None   # (k, n): files whose path hash is k modulo n
    vanished: bool = False   # the collection is gone from its (readable) source: every file it published is deleted
    top: str | None = None   # the source folder it is in: its folder ACL files (rag.sources.access) apply here too

    def admits(self, relative: str) -> bool:
        if self.vanished or (self.top_level_only and "/" in relative):
            return False
        return self.shard is None or shard_of(relative, self.shard[1]) == self.shard[0]


@dataclass(frozen=True)
class PartitionSpec:
    """One partition: its key (the Dagster partition key), the folder it reads and which of its files."""

    key: str
    folder: Path
    selection: Selection


@dataclass(frozen=True)
class Store:
    """Where one partition keeps its state; only that partition's run ever writes here."""

    key: str
    folder: Path
    lance_uri: str

    @property
    def catalog_path(self) -> Path:
        return self.folder / "catalog.duckdb"


def shard_of(relative: str, n: int) -> int:
    """A file's shard among n, from its path inside the collection (stable across machines and runs)."""
    return int.from_bytes(hashlib.sha1(relative.encode()).digest()[:8], "big") % n


def shards_for(files: int, shard_files: int) -> int:
    """A power of two, so that a collection needs re-sharding rarely; 1 below the threshold."""
    n = 1
    while files > n * shard_files:
        n *= 2
    return n


def slug(key: str) -> str:
    """A folder name for a partition key: readable, and unique thanks to a short hash."""
    return f"{_UNSAFE.sub('_', key)[:60]}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def store(workspace: str | Path, key: str, lance_base: str | None = None) -> Store:
    return Store(key, Path(workspace) / PARTITIONS_DIR / slug(key),
                 partition_lance_uri(lance_base or str(Path(workspace) / "lancedb"), key))


def partition_lance_uri(lance_base: str, key: str) -> str:
    """A partition's own LanceDB database under the workspace's URI (a local path or object storage)."""
    return store_lance_uri(lance_base, slug(key))


def store_lance_uri(lance_base: str, folder: str) -> str:
    """The LanceDB database of the store whose folder is named `folder` (a partition key's slug)."""
    return f"{lance_base.rstrip('/')}/{PARTITIONS_DIR}/{folder}"


def claim_store(s: Store) -> None:
    """Write the partition's name into its folder, so readers can list stores without the sources; a lost or damaged
    one is written again (its retired mark, if it had one, is set again by the run that finds the collection gone)."""
    s.folder.mkdir(parents=True, exist_ok=True)
    problem = read_info(s.folder)[1]
    if problem:
        _write_info(s, {"key": s.key, "lance_uri": s.lance_uri})
        if problem != "is lost" or (s.folder / "snapshots").exists():
            _LOG.warning("%s: %s; written again from the partition's key", s.folder / STORE_INFO, problem)


def load_json(path: Path) -> tuple[object, str | None]:
    """A metadata file's JSON, or None and what is wrong with it: `is lost` or `is unreadable (<error class>)`."""
    try:
        return json.loads(path.read_bytes()), None
    except FileNotFoundError:
        return None, "is lost"
    except (OSError, ValueError, RecursionError) as err:   # invalid UTF-8 and JSON are ValueErrors
        return None, f"is unreadable ({err.__class__.__name__})"


def read_info(folder: Path) -> tuple[dict | None, str | None]:
    """A store's `partition.json` (its key, index location and retired mark), or what is wrong with it."""
    meta, problem = load_json(folder / STORE_INFO)
    if problem:
        return None, problem
    if not (isinstance(meta, dict) and isinstance(meta.get("key"), str) and isinstance(meta.get("lance_uri"), str)
            and isinstance(meta.get("retired_at", ""), str) and slug(meta["key"]) == folder.name):
        return None, "does not hold this store's key and index location"
    return meta, None


def published_stores(workspace: str | Path) -> list[Store]:
    """Every partition store of the workspace that has published at least once, by key; one whose `partition.json`
    is lost or damaged is left out (logged once) until its partition's next run writes it again."""
    stores, damaged = _scan(workspace)
    for folder, problem in damaged:
        warn_once(f"{folder / STORE_INFO}: {problem}; its partition is not served until its next ingest writes it "
                  "again")
    return [s for s, _ in stores]


def warn_once(line: str) -> None:
    """Log a damaged metadata file once per process: readers and writers look at the stores on every query and step."""
    if line not in _WARNED:
        _WARNED.add(line)
        _LOG.warning("%s", line)


def retired_keys(workspace: str | Path) -> set[str]:
    """Stores whose collection vanished and whose deletion was published (kept for as-of reads)."""
    _refresh(workspace)
    return {s.key for s, meta in _scan(workspace)[0] if meta.get("retired_at")}


def retire_store(s: Store, retired: bool = True) -> None:
    """Mark (or unmark, when its collection came back) a store whose collection vanished and was deleted."""
    meta = read_info(s.folder)[0] or {"key": s.key, "lance_uri": s.lance_uri}
    if bool(meta.get("retired_at")) != retired:
        meta.pop("retired_at", None)
        _write_info(s, meta | ({"retired_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
                               if retired else {}))


def _scan(workspace: str | Path) -> tuple[list[tuple[Store, dict]], list[tuple[Path, str]]]:
    """Published stores by key with their `partition.json`, and those whose file is lost or damaged: each file is
    read once (readers list the stores on every poll)."""
    stores, damaged = [], []
    for folder in _published_folders(workspace):
        meta, problem = read_info(folder)
        if problem:
            damaged.append((folder, problem))
        else:
            stores.append((Store(meta["key"], folder, meta["lance_uri"]), meta))
    return sorted(stores, key=lambda sm: sm[0].key), damaged


def _published_folders(workspace: str | Path) -> list[Path]:
    return sorted(p.parent.parent for p in (Path(workspace) / PARTITIONS_DIR).glob("*/snapshots/CURRENT"))


def _write_info(s: Store, meta: dict) -> None:
    tmp = s.folder / f".{STORE_INFO}.tmp"
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, s.folder / STORE_INFO)
    for mirror in MIRRORS:
        mirror.wrote(s.folder.parent.parent, f"{PARTITIONS_DIR}/{s.folder.name}/{STORE_INFO}")


def is_partitioned(workspace: str | Path) -> bool:
    return (Path(workspace) / PARTITIONS_DIR).is_dir()


def check_layout(workspace: str | Path, partitioned: bool) -> None:
    """Refuse to write a workspace in the other layout: readers would see its documents twice."""
    ws = Path(workspace)
    if partitioned and (ws / "catalog.duckdb").exists():
        raise PartitionError(f"{ws}: holds a whole (unpartitioned) catalog; ingest partitions into a new workspace")
    if not partitioned and is_partitioned(ws):
        raise PartitionError(f"{ws}: is partitioned by collection; ingest with --partitioned or --partition")


def discover(sources: list[str], workspace: str | Path, shard_files: int | None = None) -> list[PartitionSpec]:
    """The partitions the sources hold now; new large collections are sharded and the layout recorded."""
    specs, layout, changed = _plan(sources, workspace, shard_files)
    if changed:
        _write_layout(workspace, layout)
    return specs


def vanished(sources: list[str], workspace: str | Path, shard_files: int | None = None) -> list[str]:
    """Published, not yet retired stores whose collection is gone from a source folder that is still readable.

    A source that is missing or unreadable as a whole (an unmounted share) deletes nothing; a store left by a
    key that never named a collection (`src/hr/`, `src/./hr`) counts as vanished, so it stops hiding the ids
    it shares with the real collection.
    """
    specs, layout, _ = _plan(sources, workspace, shard_files)
    known, retired = {s.key for s in specs}, retired_keys(workspace)
    found, unknown = _damaged_keys(workspace, layout)
    if unknown:
        folder, problem = unknown[0]
        raise PartitionError(f"{folder / STORE_INFO}: {problem}, and no collection of {PARTITIONS_DIR}/{LAYOUT} "
                             f"has this store's name; move {folder} away, then run the ingest again")
    keys = [s.key for s in published_stores(workspace)] + found
    return [k for k in keys if k not in known and k not in retired and _readable_source(sources, k) is not None]


def _damaged_keys(workspace: str | Path, layout: dict[str, int]) -> tuple[list[str], list[tuple[Path, str]]]:
    """The keys of published stores whose `partition.json` is lost or damaged, found among the layout's collections
    (the run of each writes it again), and those stores whose name none of them has."""
    by_slug = {slug(k): k for name, n in layout.items() for k in _keys(name, n)}
    damaged = _scan(workspace)[1]
    return [by_slug[f.name] for f, _ in damaged if f.name in by_slug], [(f, p) for f, p in damaged
                                                                       if f.name not in by_slug]


def _keys(name: str, n: int) -> list[str]:
    return [name] if n == 1 else [f"{name}~{k}of{n}" for k in range(n)]


def unpublished(sources: list[str], workspace: str | Path, shard_files: int | None = None) -> list[PartitionSpec]:
    """The partitions the sources hold whose store never published (a first run comes before them)."""
    published = {s.key for s in published_stores(workspace)}
    return [s for s in _plan(sources, workspace, shard_files)[0] if s.key not in published]


def resolve(sources: list[str], key: str, workspace: str | Path | None = None,
            shard_files: int | None = None) -> PartitionSpec:
    """The partition a key names exactly (after NFC normalisation; never resolved as a path).

    With the workspace, a published store whose collection has vanished resolves to a selection that deletes
    everything it published. Anything else is refused with one line naming the known keys.
    """
    specs, layout, changed = _plan(sources, workspace, shard_files, key)
    by_key = {unicodedata.normalize("NFC", s.key): s for s in specs}
    published = ({s.key for s in published_stores(workspace)} | set(_damaged_keys(workspace, layout)[0])
                 if workspace is not None else set())
    if key in published and key not in by_key and _readable_source(sources, key) is not None:
        # Exactly a store this workspace published (perhaps under a key older code let through) whose collection
        # is gone: it reads nothing, so no part of the key reaches a path, and deletes what it published.
        return PartitionSpec(key, _readable_source(sources, key), Selection(vanished=True))
    try:
        k = check_key(key)
    except PartitionError as err:
        raise PartitionError(f"{err}; known: {listing(sorted(by_key))}") from None
    if k in by_key:
        if changed and workspace is not None:
            _write_layout(workspace, layout)
        return by_key[k]
    raise PartitionError(f"partition {show_key(key)} is not a collection or shard of the sources; known: "
                         f"{listing(sorted(by_key))}")


def _readable_source(sources: list[str], key: str) -> Path | None:
    """The configured source folder a key's collection lived in, if that folder can be listed now."""
    for source in _named_sources(sources):
        root = Path(source)
        if key == root.name or key.startswith((root.name + "/", root.name + "~")):
            try:
                os.listdir(root)
            except OSError:
                return None
            return root
    return None


def _plan(sources: list[str], workspace: str | Path | None, shard_files: int | None, only: str | None = None
          ) -> tuple[list[PartitionSpec], dict, bool]:
    """The partitions the sources hold now, with the layout (shard counts) they imply and whether it is new."""
    shard_files = shard_files or default_shard_files()
    _refresh(workspace, only)
    layout, problem = _read_layout(workspace) if workspace is not None else ({}, None)
    before = dict(layout)
    specs: list[PartitionSpec] = []
    for source in _named_sources(sources):
        root = Path(source)
        groups: dict[str, Path | None] = {}
        for entry in sorted(root.iterdir()) if root.is_dir() else []:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir():
                groups[f"{root.name}/{entry.name}"] = entry
            else:
                groups.setdefault(root.name, None)
        for name, folder in sorted(groups.items()):
            if name not in layout:   # only a collection seen for the first time is counted
                files = (sum(len(f) for _, _, f in os.walk(folder)) if folder is not None else
                         sum(1 for e in root.iterdir() if not e.name.startswith(".") and not e.is_symlink()
                             and not e.is_dir()))
                layout[name] = shards_for(files, shard_files)
            specs += [_spec(name, root, k, layout[name]) for k in range(layout[name])]
    changed = workspace is not None and (layout != before or problem is not None
                                         or not (Path(workspace) / PARTITIONS_DIR / LAYOUT).exists())
    return specs, layout, changed


def _spec(name: str, root: Path, k: int, n: int) -> PartitionSpec:
    key = name if n == 1 else f"{name}~{k}of{n}"
    shard = None if n == 1 else (k, n)
    if name == root.name:
        return PartitionSpec(key, root, Selection(top_level_only=True, shard=shard, top=str(root)))
    return PartitionSpec(key, root / name.split("/", 1)[1], Selection(shard=shard, top=str(root)))


def _named_sources(sources: list[str]) -> list[str]:
    resolved = [str(Path(s).resolve()) for s in sources]
    names = [Path(s).name for s in resolved]
    if len(set(names)) != len(names):
        raise PartitionError("partitioned sources need distinct folder names: " + ", ".join(sorted(names)))
    return resolved


def _read_layout(workspace: str | Path) -> tuple[dict[str, int], str | None]:
    """Each collection's shard count, and what is wrong with `layout.json` when it is lost or damaged while stores
    exist: then the counts are rebuilt from the stores' keys (`name~kofn`), never recounted from the sources."""
    path = Path(workspace) / PARTITIONS_DIR / LAYOUT
    layout, problem = load_json(path)
    if problem is None:
        if isinstance(layout, dict) and all(isinstance(k, str) and _shard_count(n) for k, n in layout.items()):
            return layout, None
        problem = "does not hold a shard count (a power of two) per collection"
    rebuilt = _layout_from_stores(path, problem)
    return rebuilt, problem if rebuilt or problem != "is lost" else None


def _shard_count(n: object) -> bool:
    return type(n) is int and n > 0 and n & (n - 1) == 0


def _layout_from_stores(path: Path, problem: str) -> dict[str, int]:
    layout: dict[str, int] = {}
    for folder in sorted(p for p in path.parent.iterdir() if p.is_dir()) if path.parent.is_dir() else []:
        meta = read_info(folder)[0]
        if meta is None:
            continue
        m = _SHARD.match(meta["key"])
        name, n = (m["name"], int(m["n"])) if m else (meta["key"], 1)
        if layout.setdefault(name, n) != n:
            raise PartitionError(f"{path}: {problem}, and the stores disagree on how many shards {show_key(name)} has "
                                 f"({layout[name]} and {n}); write it again as {{\"<collection>\": <shards>, ...}}")
    return layout


def _write_layout(workspace: str | Path, layout: dict[str, int]) -> None:
    folder = Path(workspace) / PARTITIONS_DIR
    problem = _read_layout(workspace)[1]
    if problem:
        _LOG.warning("%s: %s; rebuilt from the partition stores' keys", folder / LAYOUT, problem)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{LAYOUT}.tmp"
    tmp.write_text(json.dumps(layout, indent=1, sort_keys=True))
    os.replace(tmp, folder / LAYOUT)
    for mirror in MIRRORS:
        mirror.wrote(Path(workspace), f"{PARTITIONS_DIR}/{LAYOUT}")
