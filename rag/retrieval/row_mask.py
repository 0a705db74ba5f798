"""Which rows a caller may read (rule 1's pre-filter): per ACL set, then per row through the row's set, kept per
group set for the callers that repeat (a boolean row mask per group set was 10 MB at 10M rows)."""
from __future__ import annotations

import threading

import numpy as np

MASKS_KEPT = 256  # group sets whose pre-filter is kept (callers repeat their group sets)


class RowMask:
    """The rows a caller may read, as its readable ACL sets and each row's set: indexed like the boolean mask it
    stands for, with nothing as long as the rows kept per caller (at 10M rows a mask per group set was 10 MB)."""

    __slots__ = ("sets", "acl_ids", "live")

    def __init__(self, sets: np.ndarray, acl_ids: np.ndarray, live: np.ndarray | None = None):
        self.sets, self.acl_ids, self.live = sets, acl_ids, live

    def __getitem__(self, rows) -> np.ndarray:
        found = self.sets[self.acl_ids[rows]]
        return found if self.live is None else found & self.live[rows]

    def __len__(self) -> int:
        return len(self.acl_ids)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = self[slice(None)]
        return whole if dtype is None else whole.astype(dtype)


def row_mask(masks: dict, lock: threading.Lock, acl_sets: list[frozenset[str]], acl_ids: np.ndarray,
             groups: frozenset[str], live: np.ndarray | None = None) -> RowMask:
    """The live rows whose ACL (acl_sets[acl_ids[row]]) admits one of the groups, kept in `masks` for the last
    MASKS_KEPT group sets (callers repeat their group sets)."""
    return kept(masks, lock, groups, lambda: RowMask(readable_sets(acl_sets, groups), acl_ids, live))


def kept(cache: dict, lock: threading.Lock, key, build):
    """cache[key], built and remembered when absent."""
    found = cache.get(key)
    return found if found is not None else remember(cache, lock, key, build())


def readable_sets(acl_sets: list[frozenset[str]], groups: frozenset[str]) -> np.ndarray:
    """Per ACL set, whether it admits one of the groups."""
    return np.fromiter((not groups.isdisjoint(s) for s in acl_sets), dtype=bool, count=len(acl_sets))


def remember(cache: dict, lock: threading.Lock, key, value):
    """`value`, kept in `cache` under `key`; the oldest entry makes room past MASKS_KEPT."""
    with lock:
        if len(cache) >= MASKS_KEPT:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return value
