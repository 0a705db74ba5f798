"""Published snapshots: immutable read-only copies of the catalog that readers open instead of the writer's file.

DuckDB lets one process write a file or several read it, never both, so readers never touch
`catalog.duckdb`. At each publish point the writer checkpoints it, copies it to `snapshots/NNNNNNNN.duckdb`
and then swaps the `snapshots/CURRENT` pointer with an atomic rename: a reader sees the old state or the
new one, never half of either. The pointer also pins the LanceDB table version the snapshot goes with.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

SNAPSHOT_DIR = "snapshots"
POINTER = "CURRENT"
DEFAULT_KEEP = int(os.environ.get("RAG_SNAPSHOTS_KEPT", "4"))


class NoSnapshot(LookupError):
    """Nothing has been published in this workspace yet."""


@dataclass(frozen=True)
class SnapshotInfo:
    """What the pointer says: which file, the LanceDB table version to read with it, when it was made."""

    seq: int
    file: str                 # name inside snapshots/
    publish_id: int
    lance_version: int | None
    created_at: str

    def path(self, workspace: Path) -> Path:
        return Path(workspace) / SNAPSHOT_DIR / self.file


def read_pointer(workspace: str | Path) -> SnapshotInfo:
    path = Path(workspace) / SNAPSHOT_DIR / POINTER
    try:
        return SnapshotInfo(**json.loads(path.read_text()))
    except FileNotFoundError:
        raise NoSnapshot(f"{workspace}: nothing published yet; run `rag ingest --workspace {workspace}` first") from None
    except (OSError, ValueError, TypeError, RecursionError) as err:
        raise NoSnapshot(f"{workspace}: unreadable snapshot pointer {SNAPSHOT_DIR}/{POINTER} "
                         f"({err.__class__.__name__}); nothing is served until the next publish") from None


def pointer_stamp(workspace: str | Path) -> tuple[int, int] | None:
    """A cheap identity of the pointer file (inode, mtime), to notice a publish without reading it."""
    try:
        st = (Path(workspace) / SNAPSHOT_DIR / POINTER).stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def publish_snapshot(catalog_path: str | Path, checkpoint, publish_id: int, lance_version: int | None,
                     keep: int = DEFAULT_KEEP) -> SnapshotInfo:
    """Copy the checkpointed catalog into a new snapshot and make it current; prune old snapshot files."""
    workspace = Path(catalog_path).parent
    folder = workspace / SNAPSHOT_DIR
    folder.mkdir(exist_ok=True)
    try:
        previous = read_pointer(workspace)
    except NoSnapshot:
        previous = None
    seq = (previous.seq if previous else 0) + 1
    if lance_version is None and previous:
        lance_version = previous.lance_version
    checkpoint()
    name = f"{seq:08d}.duckdb"
    tmp = folder / f".{name}.tmp"
    shutil.copyfile(catalog_path, tmp)
    _fsync(tmp)
    os.replace(tmp, folder / name)
    info = SnapshotInfo(seq, name, publish_id, lance_version,
                        datetime.now(timezone.utc).isoformat(timespec="milliseconds"))
    pointer_tmp = folder / f".{POINTER}.tmp"
    pointer_tmp.write_text(json.dumps(asdict(info)))
    _fsync(pointer_tmp)
    os.replace(pointer_tmp, folder / POINTER)
    _prune(folder, seq, keep)
    return info


def _prune(folder: Path, seq: int, keep: int) -> None:
    """Delete all but the newest `keep` snapshots; a reader that has one open keeps reading it (POSIX unlink)."""
    for path in folder.glob("*.duckdb"):
        if path.stem.isdigit() and int(path.stem) <= seq - max(keep, 1):
            path.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
