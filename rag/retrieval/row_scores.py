"""A query's exact scores of the rows it scored: what a score array as long as the snapshot held, in memory the size
of the rows scored (at 10M rows, filling that array cost more than the IVF walk that needs a few thousand)."""
from __future__ import annotations

import numpy as np


class RowScores:
    """Row → exact score for the rows scored so far, NaN for every other row; indexed like an array by row arrays."""

    __slots__ = ("rows", "values")

    def __init__(self, rows: np.ndarray | None = None, values: np.ndarray | None = None):
        rows = np.zeros(0, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        values = np.zeros(0, dtype=np.float32) if values is None else np.asarray(values, dtype=np.float32)
        order = np.argsort(rows, kind="stable")
        self.rows, self.values = rows[order], values[order]

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(self.rows):
            return np.full(rows.shape, np.nan, dtype=np.float32)
        at = np.minimum(np.searchsorted(self.rows, rows), len(self.rows) - 1)
        return np.where(self.rows[at] == rows, self.values[at], np.float32(np.nan))

    def __setitem__(self, rows: np.ndarray, values: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return
        kept = ~np.isin(self.rows, rows)  # a row scored again takes its new value
        merged = np.concatenate([self.rows[kept], rows])
        order = np.argsort(merged, kind="stable")
        self.rows = merged[order]
        self.values = np.concatenate([self.values[kept], np.broadcast_to(np.asarray(values, np.float32),
                                                                         rows.shape)])[order]

    def __len__(self) -> int:
        return len(self.rows)

