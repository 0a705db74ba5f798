"""A query's scores held for the rows it scored only: read and written like the array as long as the snapshot that
it replaces."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag.retrieval.row_scores import RowScores

rows = st.lists(st.integers(0, 999), max_size=60, unique=True)


@settings(max_examples=200, deadline=None)
@given(first=rows, later=rows, asked=st.lists(st.integers(0, 999), max_size=80), seed=st.integers(0, 1000))
def test_row_scores_read_and_write_like_a_nan_filled_array(first, later, asked, seed):
    rng = np.random.default_rng(seed)
    dense = np.full(1000, np.nan, dtype=np.float32)
    sparse = RowScores(np.array(first, dtype=np.int64), rng.random(len(first)).astype(np.float32))
    dense[first] = sparse[np.array(first, dtype=np.int64)]
    values = rng.random(len(later)).astype(np.float32)
    dense[later] = values
    sparse[np.array(later, dtype=np.int64)] = values
    asked = np.array(asked, dtype=np.int64)
    assert np.array_equal(sparse[asked], dense[asked], equal_nan=True)
    assert sorted(sparse.rows.tolist()) == sorted(set(first) | set(later)) and len(sparse) == len(sparse.rows)


def test_nothing_scored_reads_as_nan():
    assert np.isnan(RowScores()[np.array([0, 5])]).all()
