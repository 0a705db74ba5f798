"""The partition files of a workspace kept in $RAG_SNAPSHOT_URI's bucket, so every pod plans from the same ones.

The sensor, the code server and each run start in empty folders; the layout (`partitions/layout.json`), each store's
`partition.json` and its pointer are read from the bucket into the folder before partitions are planned (each object
asked for only if it changed since this folder last read it: one conditional request, no body when unchanged), and
every one written in a folder is copied to the bucket. A pointer that names no publish yet (a writer took the store
and has not published) is not copied: the store counts as unpublished until its first publish. The layout is merged
with a conditional write, so collections two pods add at once are both kept; a collection's shard count, once in the
bucket, is never changed.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rag.sources.partitions import LAYOUT, PARTITIONS_DIR, STORE_INFO
from rag.store.snapshot_objects import ETAG_FILE, bucket, published

SEEN = ".bucket-view.json"   # object → the version this folder last read
LAYOUT_NAME = f"{PARTITIONS_DIR}/{LAYOUT}"
REQUESTS_IN_FLIGHT = 16
_LOG = logging.getLogger("rag.store")


class BucketView:
    """The `rag.sources.partitions.Mirror` of the bucket: a no-op unless $RAG_SNAPSHOT_URI is set."""

    def __init__(self):
        self._refreshed: dict[str, float] = {}
        self._guard = threading.Lock()

    def refresh(self, workspace: Path, slugs: list[str] | None = None) -> None:
        """Read the bucket's layout and stores (or only these stores: a run's own) into the folder, at most once per
        $RAG_SNAPSHOT_POLL_S (1 s): a run reads in proportion to its partition, the sensor to the workspace."""
        objects = bucket()
        root = str(Path(workspace).resolve())
        every_s = float(os.environ.get("RAG_SNAPSHOT_POLL_S", "1"))
        with self._guard:
            if objects is None or time.monotonic() - self._refreshed.get(f"{root}#{slugs}", -1e9) < every_s:
                return
            seen_file = Path(root) / PARTITIONS_DIR / SEEN
            seen = _read_json(seen_file) or {}
            folders = objects.folders(f"{PARTITIONS_DIR}/") if slugs is None else \
                [f"{PARTITIONS_DIR}/{s}" for s in slugs]
            names = [LAYOUT_NAME] + [f"{p}/{n}" for p in folders for n in (STORE_INFO, "snapshots/CURRENT")]
            with ThreadPoolExecutor(max_workers=REQUESTS_IN_FLIGHT) as pool:
                found = dict(zip(names, pool.map(lambda n: objects.get_if_changed(n, seen.get(n)), names)))
            for name, got in found.items():
                if got is None or _pulled_here(Path(root), name):
                    continue
                if not _names_nothing(name, got.body):
                    _write(Path(root) / name, got.body)
                seen[name] = got.etag
            _write(seen_file, json.dumps(seen).encode())
            self._refreshed[f"{root}#{slugs}"] = time.monotonic()

    def wrote(self, workspace: Path, relative: str) -> None:
        """Copy a file just written in the folder to the bucket; the layout is merged with the bucket's."""
        objects = bucket()
        if objects is None:
            return
        path = Path(workspace) / relative
        if relative != LAYOUT_NAME:
            objects.put(relative, path.read_bytes())
            return
        for _ in range(10):   # another pod's collections are merged in, never overwritten
            found = objects.get(LAYOUT_NAME)
            theirs = json.loads(found.body) if found else {}
            merged = theirs | {k: v for k, v in (_read_json(path) or {}).items() if k not in theirs}
            if found is not None and merged == theirs:
                break
            body = json.dumps(merged, indent=1, sort_keys=True).encode()
            if (objects.create(LAYOUT_NAME, body) if found is None else
                    objects.swap(LAYOUT_NAME, body, found.etag)) is not None:
                break
        else:
            raise RuntimeError(f"{objects.uri}/{LAYOUT_NAME}: changed ten times while this pod merged its layout")
        if merged != _read_json(path):
            _LOG.warning("%s: another pod recorded these collections first; its shard counts are kept", path)
            _write(path, json.dumps(merged, indent=1, sort_keys=True).encode())


def _pulled_here(root: Path, name: str) -> bool:
    """A pointer this folder pulls with its snapshot (a reader's, a writer's own store) is left to that pull."""
    return name.endswith("/CURRENT") and (root / name).with_name(ETAG_FILE).exists()


def _names_nothing(name: str, body: bytes) -> bool:
    """A pointer a lease grant made before the store's first publish: the store is not published, so no folder holds
    it (a damaged one is copied as it is, for its readers to report)."""
    try:
        return name.endswith("/CURRENT") and published(body) is None
    except ValueError:
        return False


def _read_json(path: Path):
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _write(path: Path, body: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(body)
    os.replace(tmp, path)
