"""One writer per workspace: an advisory lock on `<workspace>/writer.lock`, whatever the entry point.

The kernel releases a `flock` when its holder dies, so a killed run never leaves a stale lock. The lock is
re-entrant within a process, so a Dagster run can hold it from its first step to its last while each step
opens the catalog again. Where pods share no disk, $RAG_WRITER_LOCK_URL adds a Postgres lease on the store's
name (rag.store.writer_lease), which a writer on another machine sees too; `check_held` before a publish swaps
its pointer makes a lost lease an error, never a silent second writer. With $RAG_SNAPSHOT_URI the outermost
acquire restores the store from the bucket and the outermost release checkpoints it back, lease still held
(rag.store.store_checkpoint): any run may start in an empty folder.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from rag.store.snapshot_objects import SNAPSHOT_URI_ENV, store_prefix
from rag.store.store_checkpoint import restore, save
from rag.store.writer_held import GUARD as _GUARD
from rag.store.writer_held import HELD as _HELD
from rag.store.writer_held import LOCK_FILE, Held, check_held  # noqa: F401 (its callers import it here)
from rag.store.writer_lease import LeaseLost, PostgresLease, lease_url

_LOG = logging.getLogger("rag.store")


class WriterBusy(RuntimeError):
    """Another process holds the workspace's writer lock and did not release it in time."""


def _describe(path: Path) -> str:
    try:
        holder = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        holder = {}
    if not holder:
        return "another process"
    return f"pid {holder.get('pid')} ({holder.get('entry', 'unknown')}), since {holder.get('since')}"


class WriterLock:
    """Hold the workspace for writing; a second writer waits up to `wait_s`, then raises `WriterBusy`."""

    def __init__(self, workspace: str | Path, entry: str = "rag", wait_s: float | None = None):
        self.path = Path(workspace).resolve() / LOCK_FILE
        self.entry = entry
        self.wait_s = float(os.environ.get("RAG_WRITER_WAIT_S", "60")) if wait_s is None else wait_s

    def acquire(self) -> None:
        key = str(self.path)
        with _GUARD:
            held = _HELD.get(key)
            if held:
                held.depth += 1
                return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise WriterBusy(f"{self.path.parent}: another writer holds this workspace "
                                     f"({_describe(self.path)}); gave up after {self.wait_s:g} s") from None
                time.sleep(0.1)
        lease = self._lease(fd, deadline)
        try:
            restored = self._restore(lease)
        except BaseException:
            if lease is not None:
                lease.close()
            os.close(fd)
            raise
        since = datetime.now(timezone.utc).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "entry": self.entry, "since": since}).encode(), 0)
        with _GUARD:
            _HELD[key] = Held(fd, 1, lease, restored)

    def release(self) -> None:
        key = str(self.path)
        with _GUARD:
            held = _HELD.get(key)
            if not held:
                return
            held.depth -= 1
            if held.depth:
                return
            del _HELD[key]
        try:
            self._checkpoint(held)
        finally:
            if held.lease is not None:
                held.lease.close()
            os.ftruncate(held.fd, 0)
            os.close(held.fd)  # closing the descriptor releases the flock

    def _checkpoint(self, held: Held) -> None:
        """Checkpoint the store while the lease is still held; a lost lease checkpoints nothing (the publish that
        found it lost failed already; one made before is in the bucket, and the next writer continues from it)."""
        if held.restored is None:
            return
        try:
            save(self.path.parent, held.restored, held.lease.check if held.lease else lambda: None)
        except LeaseLost as err:
            _LOG.warning("%s; its catalog was not checkpointed", err)

    def _restore(self, lease: PostgresLease | None):
        """The store's state of record from the bucket, if there is one (rag.store.store_checkpoint)."""
        return restore(self.path.parent, lease.epoch if lease else None)

    def _lease(self, fd: int, deadline: float) -> PostgresLease | None:
        """The cross-machine lease, named by where the store's snapshots are published (not by a local path)."""
        url = lease_url()
        if url is None:
            return None
        bucket = os.environ.get(SNAPSHOT_URI_ENV)
        name = f"{bucket}#{store_prefix(self.path.parent)}" if bucket else str(self.path.parent)
        lease = PostgresLease(url, name, self.entry)
        if not lease.acquire(deadline):
            os.close(fd)
            raise WriterBusy(f"{self.path.parent}: another writer holds this store's lease ({lease.holder()}); "
                             f"gave up after {self.wait_s:g} s")
        return lease

    def __enter__(self) -> "WriterLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
