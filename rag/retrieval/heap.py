"""The process's heap around a read-state build: what the build freed goes back to the system, not to a heap that
keeps it for the life of a serving worker."""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TypeVar

import pyarrow as pa

T = TypeVar("T")
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
BUILD_BLOCKS = 256 * 1024  # from this size a build's blocks are mapped apart, and unmapped when freed
QUERY_BLOCKS = 32 * 1024 * 1024  # the ceiling glibc's own sliding threshold reaches: a query's blocks stay reusable


def release_free_memory() -> None:
    """Return to the system what a build freed but the allocators kept (Arrow's pool, glibc's heap): the texts and
    rows read to build a part are gone once it is built, yet would stay resident (215 MB of 870 at 110K)."""
    pa.default_memory_pool().release_unused()
    _glibc("malloc_trim", 0)


def built(build: Callable[[], T]) -> T:
    """build(), its large blocks mapped apart. glibc's threshold slides up to the largest block freed (Lance's and
    Arrow's buffers reach 32 MB), so the blocks a build reads through came from the heap and stayed there, fragmented
    by what it kept: 440 MB at 1M sub-chunks after the vectors part, which malloc_trim could not return."""
    _threshold(BUILD_BLOCKS)
    try:
        return build()
    finally:
        _threshold(QUERY_BLOCKS)


def _threshold(size: int) -> None:
    _glibc("mallopt", M_MMAP_THRESHOLD, size)


def _glibc(call: str, *args: int) -> None:
    """The C library's `call`(*args) where it is glibc; elsewhere (macOS, musl) there is nothing to do this way."""
    try:
        getattr(ctypes.CDLL("libc.so.6"), call)(*args)
    except (OSError, AttributeError):
        pass
