"""A writer's store restored from the bucket when it takes the store, and checkpointed back before it lets go.

With $RAG_SNAPSHOT_URI a store's folder is a cache: any run may start in an empty one. Under the lease the writer
stamps its epoch into the store's two pointers, the snapshot's and the checkpoint's (creating either that does not
exist yet, naming nothing but the epoch: rag.store.snapshot_objects.stamp), pulls the store's published snapshot
(segments, manifest, pointer, `partition.json`), and restores the files only the writer reads (`PRIVATE`: the
catalog, its compaction record, the id record it last wrote). Those are kept as content-addressed chunks
(`checkpoint/chunks/<sha256>`) that `checkpoint/CURRENT` names file by file: a checkpoint uploads only the chunks the
previous one lacks, so its bytes follow the change (DuckDB rewrites the blocks a change touches), and a restore
downloads only the chunks the folder lacks (none, when the folder is the one the last run used). The checkpoint is
swapped with a conditional write against the version the stamp left, so a writer that lost its lease never
overwrites one, even when it lost the lease after its last check.
"""
from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rag.store import snapshot_objects as objects
from rag.store.object_store import ObjectStore
from rag.store.snapshot_pull import pull_store

CHUNK_BYTES = 64 * 1024   # 4 catalog blocks: a change rewrites few chunks, and a store has few objects
PRIVATE = ("catalog.duckdb", "catalog.duckdb.wal", "catalog.duckdb.compacted", "doc_ids.json")
POINTER = "checkpoint/CURRENT"
MOVED = ".checkpoint-io.json"   # in the folder: the bytes the last restore downloaded and its checkpoint uploaded
REQUESTS_IN_FLIGHT = 16


class CheckpointMoved(RuntimeError):
    """Another writer checkpointed this store since this one restored it: this checkpoint is not made current."""


@dataclass
class Restored:
    """What a writer took from the bucket: the checkpoint's version (its swap's condition) and its chunks."""

    etag: str | None = None
    chunks: set[str] = field(default_factory=set)
    downloaded: int = 0   # bytes
    uploaded: int = 0


def restore(folder: Path, epoch: int | None) -> Restored | None:
    """Bring the store's published snapshot and private files from the bucket into `folder` (None: no bucket)."""
    bucket = objects.bucket()
    if bucket is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    prefix = objects.store_prefix(folder)
    if epoch is not None:   # first, so that what is read next is what no earlier holder can change any more
        objects.stamp(bucket, f"{prefix}snapshots/CURRENT", epoch, {"seq": 0})
        objects.stamp(bucket, prefix + POINTER, epoch, {})
    done = Restored(downloaded=pull_store(bucket, folder, prefix))
    objects.drop_unpublished(folder)
    found = bucket.get(prefix + POINTER)
    done.etag = found.etag if found else None
    files = json.loads(found.body).get("files") if found else None
    if files is None:
        return done   # never checkpointed: a first run, or a store from before checkpoints (its folder is kept)
    done.chunks = {c for f in files.values() for c in f["chunks"]}
    for name in PRIVATE:
        if name not in files:
            (folder / name).unlink(missing_ok=True)   # a log or record the checkpoint does not have must not apply
    for name, entry in files.items():
        done.downloaded += _restore_file(bucket, prefix, folder / name, entry["chunks"])
    return done


def _restore_file(bucket: ObjectStore, prefix: str, path: Path, chunks: list[str]) -> int:
    """Write the file from its chunks, downloading only those the local copy lacks; bytes downloaded."""
    local = _hashes(path) if path.exists() else []
    if local == chunks:
        return 0
    have = dict(zip(local, _pieces(path))) if local else {}
    wanted = sorted({c for c in chunks if c not in have})
    with ThreadPoolExecutor(max_workers=REQUESTS_IN_FLIGHT) as pool:
        fetched = dict(zip(wanted, pool.map(lambda c: _chunk(bucket, prefix, c), wanted)))
    tmp = path.with_name(f".{path.name}.restore")
    with open(tmp, "wb") as out:
        for c in chunks:
            out.write(have[c] if c in have else fetched[c])
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return sum(len(b) for b in fetched.values())


def _chunk(bucket: ObjectStore, prefix: str, name: str) -> bytes:
    found = bucket.get(f"{prefix}checkpoint/chunks/{name}")
    if found is None:
        raise CheckpointMoved(f"{objects.masked(bucket.uri)}/{prefix}{POINTER}: names chunk {name[:12]}…, which is "
                              "gone (another writer checkpointed meanwhile); run again")
    return found.body


def save(folder: Path, restored: Restored, check) -> None:
    """Upload the private files' new chunks and swap the checkpoint; `check()` raises if the lease is lost."""
    bucket = objects.bucket()
    if bucket is None:
        return
    prefix = objects.store_prefix(folder)
    files, new = {}, {}
    for name in PRIVATE:
        path = folder / name
        if path.exists():
            hashes = _hashes(path)
            files[name] = {"size": path.stat().st_size, "chunks": hashes}
            new.update((h, (path, i)) for i, h in enumerate(hashes) if h not in restored.chunks)
    upload = sorted(new)
    with ThreadPoolExecutor(max_workers=REQUESTS_IN_FLIGHT) as pool:
        list(pool.map(lambda h: bucket.put(f"{prefix}checkpoint/chunks/{h}", _piece(*new[h])), upload))
    restored.uploaded = sum(len(_piece(*new[h])) for h in upload)
    body = json.dumps({"files": files}).encode()
    check()
    etag = bucket.create(prefix + POINTER, body) if restored.etag is None else \
        bucket.swap(prefix + POINTER, body, restored.etag)
    if etag is None:
        raise CheckpointMoved(f"{objects.masked(bucket.uri)}/{prefix}{POINTER}: another writer checkpointed this "
                              "store while this one held it; its checkpoint was not made current (check the lease)")
    kept = {c for f in files.values() for c in f["chunks"]}
    for gone in sorted(restored.chunks - kept):
        bucket.delete(f"{prefix}checkpoint/chunks/{gone}")
    restored.etag, restored.chunks = etag, kept
    (folder / MOVED).write_text(json.dumps({"restored_bytes": restored.downloaded,
                                            "checkpointed_bytes": restored.uploaded}))


def _pieces(path: Path):
    with open(path, "rb") as f:
        while piece := f.read(CHUNK_BYTES):
            yield piece


def _hashes(path: Path) -> list[str]:
    return [hashlib.sha256(p).hexdigest() for p in _pieces(path)]


def _piece(path: Path, i: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(i * CHUNK_BYTES)
        return f.read(CHUNK_BYTES)
