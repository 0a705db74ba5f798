"""Publishes made on another machine, copied from $RAG_SNAPSHOT_URI's bucket into a local folder for its readers.

Segments are immutable, so a copy is never stale; the segments come first, the manifest next, the pointer last, so
local reads stay atomic. A writer restoring its store pulls the same way (rag.store.store_checkpoint).
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from rag.store import snapshot_objects as objects
from rag.store.snapshot_files import (
    POINTER,
    SEGMENT_DIR,
    SNAPSHOT_DIR,
    NoSnapshot,
    prune,
    read_pointer,
    snapshots_kept,
    write_atomic,
)

_PULLED: dict[str, float] = {}
_PULL_LOCK = threading.Lock()


def pull(workspace: str | Path, every_s: float | None = None) -> None:
    """Copy publishes newer than the local ones from $RAG_SNAPSHOT_URI (at most once per $RAG_SNAPSHOT_POLL_S)."""
    bucket = objects.bucket()
    if bucket is None:
        return
    every_s = float(os.environ.get("RAG_SNAPSHOT_POLL_S", "1")) if every_s is None else every_s
    root = str(Path(workspace).resolve())
    with _PULL_LOCK:
        if time.monotonic() - _PULLED.get(root, -1e9) < every_s:
            return
        for prefix in objects.stores(bucket):
            pull_store(bucket, Path(root) / prefix, prefix)
        _PULLED[root] = time.monotonic()


def pull_store(bucket, store_folder: Path, prefix: str) -> int:
    """The segments first, the manifest next, the pointer last: a local reader never sees half a publish. Bytes
    downloaded; a pointer naming the publish held here already (stamped with a new epoch) is not rewritten."""
    folder = store_folder / SNAPSHOT_DIR
    etag_file = folder / objects.ETAG_FILE
    have = lambda names: [n for n in names if not (folder / SEGMENT_DIR / n).exists()]  # noqa: E731
    fetched = objects.fetch_newer(bucket, prefix, etag_file.read_text() if etag_file.exists() else None, have)
    if fetched is None:
        return 0
    (folder / SEGMENT_DIR).mkdir(parents=True, exist_ok=True)
    for name, body in fetched.segments.items():
        write_atomic(folder / SEGMENT_DIR / name, body)
    if fetched.store_info is not None:
        write_atomic(store_folder / objects.STORE_INFO, fetched.store_info)
    write_atomic(folder / fetched.info["file"], fetched.manifest)
    try:
        held = read_pointer(store_folder).file == fetched.info["file"]
    except NoSnapshot:
        held = False
    if not held:
        write_atomic(folder / POINTER, fetched.pointer.body)
    etag_file.write_text(fetched.pointer.etag)
    prune(folder, fetched.info["seq"], snapshots_kept())
    return sum(map(len, fetched.segments.values())) + len(fetched.manifest) + len(fetched.pointer.body)
