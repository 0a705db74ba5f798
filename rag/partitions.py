"""Collections as partitions: which files a partition reads, and the store (catalog, lock, index) it writes alone.

A source folder's sub-folders are its collections, and its top-level files form one more collection named after
the source. A collection with more files than `shard_files` when first seen is split into a power of two of
hash shards, fixed from then on (`partitions/layout.json`), so growth never moves a file to another shard.
Each partition writes only its own store, so partitions never contend; readers see the union of all stores.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

PARTITIONS_DIR = "partitions"
LAYOUT = "layout.json"
STORE_INFO = "partition.json"
DEFAULT_SHARD_FILES = int(os.environ.get("RAG_SHARD_FILES", "20000"))
_SHARD = re.compile(r"^(?P<name>.+)~(?P<k>\d+)of(?P<n>\d+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class PartitionError(ValueError):
    """A partition key that names no collection of the configured sources; the message is one line."""


@dataclass(frozen=True)
class Selection:
    """Which files of a source folder one partition reads: only the top level, and/or one hash shard."""

    top_level_only: bool = False
    shard: tuple[int, int] | None = None   # (k, n): files whose path hash is k modulo n

    def admits(self, relative: str) -> bool:
        if self.top_level_only and "/" in relative:
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
    return f"{lance_base.rstrip('/')}/{PARTITIONS_DIR}/{slug(key)}"


def claim_store(s: Store) -> None:
    """Write the partition's name into its folder, so readers can list stores without the sources."""
    s.folder.mkdir(parents=True, exist_ok=True)
    info = s.folder / STORE_INFO
    if not info.exists():
        tmp = s.folder / f".{STORE_INFO}.tmp"
        tmp.write_text(json.dumps({"key": s.key, "lance_uri": s.lance_uri}))
        os.replace(tmp, info)


def published_stores(workspace: str | Path) -> list[Store]:
    """Every partition store of the workspace that has published at least once, by key."""
    root = Path(workspace) / PARTITIONS_DIR
    found = []
    for info in sorted(root.glob(f"*/{STORE_INFO}")):
        if (info.parent / "snapshots" / "CURRENT").exists():
            meta = json.loads(info.read_text())
            found.append(Store(meta["key"], info.parent, meta["lance_uri"]))
    return sorted(found, key=lambda s: s.key)


def is_partitioned(workspace: str | Path) -> bool:
    return (Path(workspace) / PARTITIONS_DIR).is_dir()


def check_layout(workspace: str | Path, partitioned: bool) -> None:
    """Refuse to write a workspace in the other layout: readers would see its documents twice."""
    ws = Path(workspace)
    if partitioned and (ws / "catalog.duckdb").exists():
        raise PartitionError(f"{ws}: holds a whole (unpartitioned) catalog; ingest partitions into a new workspace")
    if not partitioned and is_partitioned(ws):
        raise PartitionError(f"{ws}: is partitioned by collection; ingest with --partitioned or --partition")


def discover(sources: list[str], workspace: str | Path, shard_files: int = DEFAULT_SHARD_FILES) -> list[PartitionSpec]:
    """The partitions the sources hold now; new large collections are sharded and the layout recorded."""
    layout = _read_layout(workspace)
    before = dict(layout)
    specs: list[PartitionSpec] = []
    for source in _named_sources(sources):
        root = Path(source)
        groups: dict[str, int] = {}
        for entry in sorted(root.iterdir()) if root.is_dir() else []:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir():
                groups[f"{root.name}/{entry.name}"] = sum(len(f) for _, _, f in os.walk(entry))
            else:
                groups[root.name] = groups.get(root.name, 0) + 1
        for name, files in sorted(groups.items()):
            n = layout.setdefault(name, shards_for(files, shard_files))
            specs += [_spec(name, root, k, n) for k in range(n)]
    if layout != before or not (Path(workspace) / PARTITIONS_DIR / LAYOUT).exists():
        _write_layout(workspace, layout)
    return specs


def resolve(sources: list[str], key: str) -> PartitionSpec:
    """The partition a key names (as `discover` made it), without listing any folder."""
    m = _SHARD.match(key)
    name, k, n = (m["name"], int(m["k"]), int(m["n"])) if m else (key, 0, 1)
    if n < 1 or k >= n:
        raise PartitionError(f"partition '{key}': shard {k} of {n} does not exist")
    for source in _named_sources(sources):
        root = Path(source)
        if name == root.name or name.startswith(root.name + "/"):
            return _spec(name, root, k, n)
    raise PartitionError(f"partition '{key}' names no collection of the sources "
                         f"({', '.join(Path(s).name for s in sources) or 'none configured'})")


def _spec(name: str, root: Path, k: int, n: int) -> PartitionSpec:
    key = name if n == 1 else f"{name}~{k}of{n}"
    shard = None if n == 1 else (k, n)
    if name == root.name:
        return PartitionSpec(key, root, Selection(top_level_only=True, shard=shard))
    return PartitionSpec(key, root / name.split("/", 1)[1], Selection(shard=shard))


def _named_sources(sources: list[str]) -> list[str]:
    resolved = [str(Path(s).resolve()) for s in sources]
    names = [Path(s).name for s in resolved]
    if len(set(names)) != len(names):
        raise PartitionError("partitioned sources need distinct folder names: " + ", ".join(sorted(names)))
    return resolved


def _read_layout(workspace: str | Path) -> dict[str, int]:
    path = Path(workspace) / PARTITIONS_DIR / LAYOUT
    return json.loads(path.read_text()) if path.exists() else {}


def _write_layout(workspace: str | Path, layout: dict[str, int]) -> None:
    folder = Path(workspace) / PARTITIONS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{LAYOUT}.tmp"
    tmp.write_text(json.dumps(layout, indent=1, sort_keys=True))
    os.replace(tmp, folder / LAYOUT)
