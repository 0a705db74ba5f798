"""Rows held in several arrays read as one: how a snapshot's vectors share the files of the snapshots before it.

A publish changes a few units; the next snapshot keeps every earlier row where it lies (mapped from the files an
earlier snapshot wrote, which its own files link to: rag.retrieval.state_files) and appends the new units' rows as one
more segment, so its read state writes and copies what changed, not the corpus. A slice inside one segment is a view
of it; the vectors' row ranges never cross a segment boundary (rag.retrieval.vectors splits them), so a search reads
the mapped pages and copies nothing.
"""
from __future__ import annotations

import numpy as np


class Segments:
    """The rows of `arrays` one after the other (each a file of the read state, or in memory)."""

    __slots__ = ("arrays", "bounds")

    def __init__(self, arrays: list[np.ndarray]):
        self.arrays = arrays
        self.bounds = np.cumsum([0, *map(len, arrays)])

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.bounds[-1]), *self.arrays[0].shape[1:])

    @property
    def dtype(self) -> np.dtype:
        return self.arrays[0].dtype

    def __len__(self) -> int:
        return int(self.bounds[-1])

    def appended(self, rows: np.ndarray) -> Segments:
        """These segments and one more holding `rows`."""
        return Segments([*self.arrays, rows])

    def __getitem__(self, at):
        if isinstance(at, slice):
            lo, hi, step = at.indices(len(self))
            if step == 1:
                return self._slice(lo, max(hi, lo))
        if isinstance(at, (int, np.integer)):
            i = int(at) + len(self) if at < 0 else int(at)
            seg = int(np.searchsorted(self.bounds, i, side="right")) - 1
            return self.arrays[seg][i - self.bounds[seg]]
        return self.take(np.arange(len(self))[at] if isinstance(at, slice) else np.asarray(at))

    def _slice(self, lo: int, hi: int) -> np.ndarray:
        seg = int(np.searchsorted(self.bounds, lo, side="right")) - 1 if lo < len(self) else len(self.arrays) - 1
        if hi <= self.bounds[seg + 1]:
            return self.arrays[seg][lo - self.bounds[seg]:hi - self.bounds[seg]]
        return self.take(np.arange(lo, hi))

    def take(self, rows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The rows at these positions, in this order, as one array (into `out` when given)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.empty((len(rows), *self.shape[1:]), dtype=self.dtype) if out is None else out
        which = np.searchsorted(self.bounds, rows, side="right") - 1
        for seg in np.unique(which):
            at = np.flatnonzero(which == seg)
            out[at] = self.arrays[seg][rows[at] - self.bounds[seg]]
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        whole = np.concatenate(self.arrays) if len(self.arrays) > 1 else np.asarray(self.arrays[0])
        return whole if dtype is None else whole.astype(dtype)


def segment_bounds(rows) -> np.ndarray:
    """Where each segment of the rows begins, and their end (one segment for a plain array)."""
    return rows.bounds if isinstance(rows, Segments) else np.array([0, len(rows)])


def as_segments(rows) -> Segments:
    return rows if isinstance(rows, Segments) else Segments([rows])
