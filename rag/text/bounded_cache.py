"""Memoisation bounded in bytes: a least-recently-used cache whose entries cost what their key and value hold.

A cache kept across requests and keyed by text grows with the texts it is asked about, not with its entry count;
each entry's cost is measured once, when it is stored, so the bound holds whatever lengths the texts have.
"""
from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import TypeVar

from cachetools import LRUCache

T = TypeVar("T")
# The cache's own maps and the (cost, value) pair, per entry: with it an entry's count covers its traced bytes
# (tests/hardening/test_hardening_cache_bytes.py).
ENTRY_OVERHEAD = 320


def deep_size(value: object) -> int:
    """Bytes held by a value and the containers, strings and dataclasses inside it (a shared part counted once)."""
    seen, total, stack = set(), 0, [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in fields(item))
    return total


def bytes_bounded(max_bytes: int) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """Memoise a one-argument function in at most `max_bytes` (key, value and bookkeeping); the least recently
    used entries make room, and a result larger than the whole bound is returned without being kept."""
    def wrap(build: Callable[[str], T]) -> Callable[[str], T]:
        cache: LRUCache = LRUCache(max_bytes, getsizeof=lambda entry: entry[0])
        lock = threading.Lock()

        @functools.wraps(build)
        def cached(key: str) -> T:
            with lock:
                found = cache.get(key)
            if found is not None:
                return found[1]
            value = build(key)
            cost = deep_size((key, value)) + ENTRY_OVERHEAD
            with lock:
                if cost <= max_bytes:
                    cache[key] = (cost, value)
            return value

        cached.cache = cache
        return cached
    return wrap
