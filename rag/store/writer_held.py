"""Which stores this process holds for writing, and through which lease: what a publish checks before its swap."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from rag.store.writer_lease import PostgresLease

LOCK_FILE = "writer.lock"


@dataclass
class Held:
    fd: int
    depth: int
    lease: PostgresLease | None = None
    restored: object = None   # what the store's restore took from the bucket (rag.store.store_checkpoint)


HELD: dict[str, Held] = {}
GUARD = threading.Lock()


def check_held(store_folder: str | Path) -> int | None:
    """Raise LeaseLost if this process holds the store's writer lock through a lease that has ended; else the
    lease's epoch (None without a lease)."""
    with GUARD:
        held = HELD.get(str(Path(store_folder).resolve() / LOCK_FILE))
    if held is None or held.lease is None:
        return None
    held.lease.check()
    return held.lease.epoch
