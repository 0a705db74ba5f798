"""Cheap change detection for a source: a fingerprint of file names, sizes, modification and status-change times
(a folder) or of object keys, ETags and sizes (a bucket prefix), and the cursor that names each change a sensor
requests a run for."""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from rag.sources.access import ACCESS_FILE
from rag.sources.bucket import is_bucket, listing_snapshot
from rag.sources.loaders import watched
from rag.sources.partitions import Selection

Stamp = tuple[int | str, ...]


def snapshot(source: str | Path, select: Selection | None = None) -> dict[str, Stamp]:
    """relative path → (mtime_ns, ctime_ns, size) of every file a load of this source (or of one partition) would
    read, and of every folder ACL file; of an s3:// source, key → (ETag, size), from the listing alone.

    The ctime moves on a chmod or chgrp, which may change who may read a file (`--acl-from posix`) and leaves the
    mtime as it was.
    """
    if is_bucket(source):
        return listing_snapshot(str(source))
    root = Path(source)
    if root.is_file():
        return {root.name: _stamp(root)}
    if not root.is_dir():
        return {}
    out = {}
    for p in sorted(root.iterdir() if select and select.top_level_only else root.rglob("*")):
        rel = p.relative_to(root)
        if select and not select.admits(rel.as_posix()):
            continue
        if p.is_file() and watched(rel):
            out[rel.as_posix()] = _stamp(p)
    return out | _folder_files_above(root, select)


def _stamp(path: Path) -> Stamp:
    st = path.stat()
    return st.st_mtime_ns, st.st_ctime_ns, st.st_size


def _folder_files_above(root: Path, select: Selection | None) -> dict[str, Stamp]:
    """A partition's folder ACL files in the source folder above its collection (their edit changes it too)."""
    top, root = Path(select.top if select is not None and select.top else root).resolve(), root.resolve()
    out = {}
    for folder in (f for f in root.parents if f.is_relative_to(top)):
        if (path := folder / ACCESS_FILE).is_file():
            out[os.path.relpath(path, root)] = _stamp(path)
    return out


def fingerprint(snap: dict[str, Stamp]) -> str:
    h = hashlib.sha256()
    for name, stamp in sorted(snap.items()):
        h.update("\0".join(map(str, (name, *stamp))).encode() + b"\n")
    return h.hexdigest()[:24]


def scope_id(scope: str | Path) -> str:
    """A short, stable id of the workspace (or folder) a cursor serves."""
    return hashlib.sha256(str(Path(scope).resolve()).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Changes:
    """A sensor's cursor: the fingerprint last requested for each key, for one scope, and a count of changes.

    Dagster runs a run key once, so a key must name a change, not a state: a folder that returns to an earlier
    state (files removed, then put back) is a new change with a new key. The epoch is drawn afresh whenever the
    cursor starts over (a reset sensor, a cursor of another scope's), so no key ever repeats an earlier one.
    """

    scope: str
    epoch: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    seq: int = 0
    prints: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, cursor: str | None, scope: str | Path) -> Changes:
        """The cursor as stored; one of another scope, or of an older format, knows nothing of this scope's keys."""
        scope = scope_id(scope)
        try:
            data = json.loads(cursor) if cursor else None
            if data["scope"] == scope:
                return cls(scope, str(data["epoch"]), int(data["seq"]), dict(data["prints"]))
        except (ValueError, TypeError, KeyError):
            pass
        return cls(scope)

    def changed(self, prints: dict[str, str]) -> list[str]:
        """The keys whose fingerprint differs from the one last requested, sorted."""
        return sorted(k for k, fp in prints.items() if self.prints.get(k) != fp)

    def after(self, prints: dict[str, str]) -> Changes:
        """The cursor once `prints` are requested: the next change number if anything changed."""
        return replace(self, seq=self.seq + bool(self.changed(prints)), prints=dict(prints))

    def run_key(self, key: str) -> str:
        """The key of this change's run for `key` (call on the cursor returned by `after`)."""
        return f"{key}:{self.prints[key]}@{self.scope}.{self.epoch}.{self.seq}"

    def dump(self) -> str:
        return json.dumps({"scope": self.scope, "epoch": self.epoch, "seq": self.seq, "prints": self.prints},
                          sort_keys=True)
