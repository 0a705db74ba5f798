"""Published snapshots in object storage, so that reader pods and the next writer pod need no shared disk.

With `RAG_SNAPSHOT_URI=s3://bucket/prefix` the writer uploads a publish's new segments and manifest, then
swaps the bucket's `snapshots/CURRENT` with a conditional write (If-Match the version it read before the
publish began, If-None-Match for the first): a second writer that published meanwhile makes the swap fail
instead of being overwritten. Each lease grant stamps its epoch into the pointer, creating one that names no
publish where the store never published (`stamp`), so a writer that lost its lease cannot make even a first publish
current; every reader takes such a pointer for "nothing published yet" (`published`). Readers
(rag.store.snapshot_pull) copy what the bucket's pointer names into their local folder (segments are immutable, so a
copy is never stale) and swap their local pointer last, so local reads stay atomic.
Objects mirror the workspace's layout: `snapshots/…`, or `partitions/<slug>/snapshots/…` and its store file.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rag.sources.partitions import PARTITIONS_DIR, STORE_INFO
from rag.store.object_store import ObjectStore, Versioned
from rag.store.url_settings import SNAPSHOT_URI, masked, setting

SNAPSHOT_URI_ENV = SNAPSHOT_URI
ETAG_FILE = ".CURRENT.etag"  # the bucket pointer's version that the local pointer copies


class PointerMoved(RuntimeError):
    """Another writer swapped the bucket's pointer after this publish read it: this publish is not made current."""


def published(body: bytes | str) -> dict | None:
    """The publish a pointer names (its fields), or None for one a lease grant made before the store's first publish;
    ValueError when it is not a JSON object."""
    info = json.loads(body)
    if not isinstance(info, dict):
        raise ValueError("not a JSON object")
    return info if "file" in info else None


def bucket() -> ObjectStore | None:
    uri = setting(SNAPSHOT_URI_ENV)
    return ObjectStore(uri) if uri else None


def store_prefix(store_folder: Path) -> str:
    """The store's place in the bucket: the workspace root, or partitions/<slug>/."""
    return f"{PARTITIONS_DIR}/{store_folder.name}/" if store_folder.parent.name == PARTITIONS_DIR else ""


def remote_pointer(store_folder: Path) -> Versioned | None:
    """The bucket's pointer as a publish starts (the version its swap must still find)."""
    objects = bucket()
    return objects.get(f"{store_prefix(Path(store_folder))}snapshots/CURRENT") if objects else None


def made_here(store_folder: Path, pointer: Versioned) -> bool:
    """Whether the bucket's pointer names a manifest this folder wrote (same bytes): a publish of this writer
    that swapped the bucket's pointer and died before its local one."""
    objects, name = bucket(), json.loads(pointer.body)["file"]
    local = Path(store_folder) / "snapshots" / name
    remote = objects.get(f"{store_prefix(Path(store_folder))}snapshots/{name}") if objects else None
    return local.exists() and remote is not None and remote.body == local.read_bytes()


def push(store_folder: Path, seq: int, manifest: str, pointer: str, seen: Versioned | None) -> None:
    """Upload this publish's files, then swap the bucket's pointer if nobody else did since `seen`.

    Files are created, never overwritten: a writer that lost its lease cannot replace what the holder published
    (the holder deleted any files of a publish that never became current when it restored the store)."""
    objects, folder, prefix = bucket(), Path(store_folder) / "snapshots", store_prefix(Path(store_folder))
    if objects is None:
        return
    # Before any file: a writer woken after losing its lease stops here, leaving no file in the holder's way.
    if (objects.get(prefix + "snapshots/CURRENT") if seen is None else
            objects.get_if_changed(prefix + "snapshots/CURRENT", seen.etag)) is not None:
        raise _moved(objects, prefix)
    if (Path(store_folder) / STORE_INFO).exists():
        objects.put(prefix + STORE_INFO, (Path(store_folder) / STORE_INFO).read_bytes())
    for path in sorted((folder / "segments").glob(f"{seq:08d}-*.parquet")):
        _create(objects, f"{prefix}snapshots/segments/{path.name}", path.read_bytes())
    _create(objects, f"{prefix}snapshots/{manifest}", (folder / manifest).read_bytes())
    body = pointer.encode()
    etag = objects.create(prefix + "snapshots/CURRENT", body) if seen is None else \
        objects.swap(prefix + "snapshots/CURRENT", body, seen.etag)
    if etag is None:
        raise _moved(objects, prefix)
    (folder / ETAG_FILE).write_text(etag)


def _moved(objects: ObjectStore, prefix: str) -> PointerMoved:
    return PointerMoved(f"{masked(objects.uri)}/{prefix}snapshots/CURRENT: another writer took the store or published "
                        "while this one ran; its publish was not made current (one writer per partition: check the "
                        "lease)")


def _create(objects: ObjectStore, name: str, body: bytes) -> None:
    """Create the object; one with the same bytes is this publish's own, written before a retry."""
    if objects.create(name, body) is None and getattr(objects.get(name), "body", None) != body:
        raise PointerMoved(f"{masked(objects.uri)}/{name}: another writer wrote this file of the publish; this "
                           "publish stops (one writer per partition: check the lease)")


def drop_unpublished(store_folder: Path) -> None:
    """Delete the bucket's snapshot files of publishes after the current one: a writer's that never became
    current (it died, or lost its lease, before its swap); the next publish of that number creates its own."""
    objects, prefix = bucket(), store_prefix(Path(store_folder))
    pointer = objects.get(f"{prefix}snapshots/CURRENT") if objects else None
    current = (published(pointer.body) or {}).get("seq", 0) if pointer else 0
    for key in objects.keys(f"{prefix}snapshots/") if objects else []:
        name = key.rsplit("/", 1)[1]
        if name[:8].isdigit() and int(name[:8]) > current:
            objects.delete(key[len(objects.key("")):])


def stamp(objects: ObjectStore, name: str, epoch: int, first: dict) -> None:
    """Name the lease's epoch in the pointer `name`, or create it naming the epoch and `first` (nothing published yet):
    its version changes, or it exists, so a writer that lost the lease, whose swap names the version it read before
    (or whose create expects none), can no longer make anything current."""
    for _ in range(3):   # only a writer that lost its lease can write meanwhile: its publish is then pulled
        found = objects.get(name)
        body = json.dumps(json.loads(found.body) | {"epoch": epoch} if found else {"epoch": epoch, **first}).encode()
        if (objects.create(name, body) if found is None else objects.swap(name, body, found.etag)) is not None:
            return
    raise PointerMoved(f"{masked(objects.uri)}/{name}: changed three times while this writer stamped it; another "
                       "writer is publishing without the lease")


def prune_remote(store_folder: Path) -> None:
    """Delete the bucket's snapshot files the local (just pruned) folder no longer has."""
    objects, folder, prefix = bucket(), Path(store_folder) / "snapshots", store_prefix(Path(store_folder))
    if objects is None:
        return
    for key in objects.keys(f"{prefix}snapshots/"):
        rel = key[len(objects.key(f"{prefix}snapshots/")):]
        if rel != "CURRENT" and not (folder / rel).exists():
            objects.delete(f"{prefix}snapshots/{rel}")


def stores(objects: ObjectStore) -> list[str]:
    """The bucket prefixes of every store that may have published: the workspace root and each partition."""
    return [""] + [p + "/" for p in objects.folders(f"{PARTITIONS_DIR}/")]


@dataclass
class Fetched:
    """A newer publish as the bucket holds it: its pointer, manifest, store file and the segments asked for."""

    pointer: Versioned
    info: dict
    manifest: bytes
    store_info: bytes | None
    segments: dict[str, bytes]


def fetch_newer(objects: ObjectStore, prefix: str, local_etag: str | None, missing) -> Fetched | None:
    """The store's publish if the bucket's pointer is not `local_etag`; `missing(names)` says which segments to get.

    None when nothing changed, when nothing is published yet, or when a newer publish pruned what the pointer named
    (the next poll sees it).
    """
    pointer = objects.get_if_changed(f"{prefix}snapshots/CURRENT", local_etag)
    if pointer is None:
        return None
    info = published(pointer.body)
    if info is None:   # a lease was granted, nothing published yet
        return None
    manifest = objects.get(f"{prefix}snapshots/{info['file']}")
    if manifest is None:
        return None
    segments = {}
    for name in missing(sorted({f for files in json.loads(manifest.body)["tables"].values() for f in files})):
        segment = objects.get(f"{prefix}snapshots/segments/{name}")
        if segment is None:
            return None
        segments[name] = segment.body
    store_info = objects.get(prefix + STORE_INFO) if prefix else None
    return Fetched(pointer, info, manifest.body, store_info.body if store_info else None, segments)
