"""An inverted-file (IVF) index over a snapshot's serving rows: dense search past the size an exact pass affords.

Spherical k-means centroids, trained on a sample of the rows, split the rows into lists. A search ranks the lists by
the query's centroid scores and walks them in that order, keeping only the rows the caller may read: the ACL
pre-filter is inside the search, so a caller of a rare group walks on until it holds enough of its own rows instead
of losing its top k to a later filter. It stops once it has probed NPROBE lists and holds `limit × REFINE` readable
candidates, scores those with their int8 codes (copied in list order, so a probe reads contiguous memory and the
state's own rows are read only for the rows rescored) and rescores in float16 every candidate the int8 error bound
cannot rule out of the top `limit`: the scores and order returned are exact among the candidates, and only which
rows are candidates is approximate. Each row keeps its list, so the next snapshot's state assigns only its new rows
to the centroids (building costs what changed) and trains again only when the rows grew past RETRAIN_GROWTH times
the count trained for. A caller who may read no more rows than a probe visits gets the exact pass: it reads fewer
rows, and is exact.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import simsimd

from rag.retrieval.int8_rows import Int8Rows, quantize_query
from rag.retrieval.row_scores import RowScores

ANN_MIN_ROWS = 2_000_000  # rows from which dense search uses the IVF (RAG_ANN_MIN_ROWS)
LISTS_PER_ROOT = 2        # lists = LISTS_PER_ROOT × √rows: a list holds ~√rows / 2 rows
NPROBE = 96               # lists probed at least: recall of the exact top 50 ≥ 0.99 on replicated MiniLM rows
REFINE = 4                # readable candidates held per result asked for
SAMPLE_ROWS = 262_144     # rows the centroids are trained on, at most
SAMPLE_PER_LIST = 64      # ... and at most this many per list
ITERATIONS = 10
RETRAIN_GROWTH = 4        # rows grown past this many times the count trained for: train again
BATCH_ROWS = 8_192        # rows scored against the centroids per matrix product
SEED = 0


def ann_min_rows() -> int:
    """Rows from which dense search uses the IVF: $RAG_ANN_MIN_ROWS or 2,000,000 (0: at every size)."""
    value = os.environ.get("RAG_ANN_MIN_ROWS", "").strip() or str(ANN_MIN_ROWS)
    if not value.isdigit():
        raise ValueError(f"RAG_ANN_MIN_ROWS={value!r}: expected a whole number of rows (0 uses the ANN index always)")
    return int(value)


def list_count(rows: int) -> int:
    return max(1, min(rows, round(LISTS_PER_ROOT * math.sqrt(rows))))


def concatenated_ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The ranges [lo, hi) one after the other, without an arange per range."""
    counts = hi - lo
    return np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


@dataclass
class Ivf:
    """Centroids and each row's list; once complete, the rows list by list with their int8 codes in that order."""

    centroids: np.ndarray              # (lists, dimension) float32, unit length
    lists: np.ndarray                  # per row of the state, its list (int32); -1: not assigned yet
    trained: int                       # rows the centroids were trained for
    order: np.ndarray | None = None    # the rows list by list (int64), ascending within a list
    offsets: np.ndarray | None = None  # (lists + 1,) int64: list l holds order[offsets[l]:offsets[l + 1]]
    codes: np.ndarray | None = None    # (rows, dimension) int8: the int8 codes of the rows in `order`
    scales: np.ndarray | None = None   # float32: their scales

    def take(self, rows: np.ndarray) -> Ivf:
        """These rows' lists, to be completed again (the state they belong to holds other rows)."""
        return Ivf(self.centroids, self.lists[rows], self.trained)

    def rows_probed(self) -> float:
        """Rows NPROBE lists hold on average."""
        return NPROBE * len(self.lists) / len(self.centroids)


def joined(a: Ivf | None, b: Ivf | None, a_rows: int, b_rows: int) -> Ivf | None:
    """The lists of a's rows then b's; b's rows are assigned again unless both share their centroids."""
    if a is None and b is None:
        return None
    base = a if a is not None else b
    shared = b is not None and b.centroids.shape == base.centroids.shape and np.array_equal(b.centroids, base.centroids)
    return Ivf(base.centroids, np.concatenate([a.lists if a is not None else unassigned(a_rows),
                                               b.lists if shared else unassigned(b_rows)]), base.trained)


def unassigned(rows: int) -> np.ndarray:
    return np.full(rows, -1, dtype=np.int32)


def ready(state) -> Ivf:
    """The VectorState's IVF, completed on first need: trained (or trained again) and its new rows assigned."""
    if state.ann is None or state.ann.order is None:
        state.ann = indexed(state.ann, state.matrix, state.quantized)
    return state.ann


def share_lists(joined_state, states: list) -> None:
    """Give each state that rag.retrieval.vectors.union joined (the rows of each in turn, then grouped by ACL set,
    stably) the lists its rows have in the joined state's IVF, so the next snapshot's union keeps them."""
    sets = {s: i for i, s in enumerate(joined_state.acl_sets)}
    ids = np.concatenate([np.array([sets[s] for s in state.acl_sets], dtype=np.int64)[state.acl_ids] if len(state)
                          else np.zeros(0, dtype=np.int64) for state in states])
    lists = np.empty(len(ids), dtype=np.int32)
    lists[np.argsort(ids, kind="stable")] = joined_state.ann.lists
    bounds = np.cumsum([0, *map(len, states)])
    for state, lo, hi in zip(states, bounds[:-1], bounds[1:]):
        state.ann = Ivf(joined_state.ann.centroids, lists[lo:hi], joined_state.ann.trained)


def indexed(ivf: Ivf | None, matrix: np.ndarray, int8: Int8Rows, seed: int = SEED) -> Ivf:
    """The complete IVF of these rows, keeping the lists of the rows `ivf` has assigned to centroids still fit."""
    n = len(matrix)
    if ivf is None or len(ivf.lists) != n or n > RETRAIN_GROWTH * max(ivf.trained, 1):
        centroids, lists, trained = train(matrix, seed), unassigned(n), n
    else:
        centroids, lists, trained = ivf.centroids, np.array(ivf.lists, dtype=np.int32), ivf.trained
    todo = np.flatnonzero(lists < 0)
    lists[todo] = assign(centroids, matrix, todo)
    order = np.argsort(lists, kind="stable")
    offsets = np.searchsorted(lists[order], np.arange(len(centroids) + 1)).astype(np.int64)
    return Ivf(centroids, lists, trained, order, offsets, int8.codes[order], int8.scales[order])


def train(matrix: np.ndarray, seed: int) -> np.ndarray:
    """Spherical k-means centroids of a seeded sample of the rows (a list that empties restarts at a sample row)."""
    n = len(matrix)
    k, rng = list_count(n), np.random.default_rng(seed)
    size = min(n, SAMPLE_ROWS, max(k, SAMPLE_PER_LIST * k))
    sample = matrix[np.sort(rng.choice(n, size, replace=False))]
    centroids = sample[rng.choice(size, k, replace=False)].astype(np.float32)
    for _ in range(ITERATIONS):
        sums, counts = np.zeros_like(centroids), np.zeros(k, dtype=np.int64)
        for lo in range(0, size, BATCH_ROWS):
            block = sample[lo:lo + BATCH_ROWS].astype(np.float32)
            labels = nearest_list(centroids, block)
            by_list = np.argsort(labels, kind="stable")
            sorted_labels = labels[by_list]
            starts = np.flatnonzero(np.r_[True, sorted_labels[1:] != sorted_labels[:-1]])
            sums[sorted_labels[starts]] += np.add.reduceat(block[by_list], starts, axis=0)
            counts += np.bincount(labels, minlength=k)
        empty = np.flatnonzero(counts == 0)
        sums[empty] = sample[rng.choice(size, len(empty), replace=False)]
        centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return centroids.astype(np.float32)


def nearest_list(centroids: np.ndarray, block: np.ndarray) -> np.ndarray:
    return np.argmax(block @ centroids.T, axis=1).astype(np.int32)


def assign(centroids: np.ndarray, matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The nearest centroid of each of these rows, a block of rows per matrix product."""
    out = np.empty(len(rows), dtype=np.int32)
    for lo in range(0, len(rows), BATCH_ROWS):
        out[lo:lo + BATCH_ROWS] = nearest_list(centroids, matrix[rows[lo:lo + BATCH_ROWS]].astype(np.float32))
    return out


def ann_search(state, q16: np.ndarray, groups: frozenset[str], limit: int) -> tuple[RowScores, np.ndarray] | None:
    """VectorState.search by the IVF when the state holds at least ann_min_rows() rows and the caller may read more
    rows than a probe visits; None when the exact pass is the one to take."""
    if limit <= 0 or len(state) < max(ann_min_rows(), 1):
        return None
    ivf = ready(state)
    if sum(hi - lo for lo, hi in state.ranges(groups)) <= ivf.rows_probed():
        return None
    return search(ivf, state, q16, state.mask(groups), limit)


def search(ivf: Ivf, state, q16: np.ndarray, mask: np.ndarray, limit: int, nprobe: int = NPROBE,
           refine: int = REFINE) -> tuple[RowScores, np.ndarray]:
    """The nearest readable rows among those the probed lists hold, best first (ties by row), with their exact
    float16 scores (NaN on rows not rescored); lists are probed until `limit × refine` readable candidates are held."""
    candidates = probe(ivf, np.argsort(-(ivf.centroids @ q16[0].astype(np.float32))), mask, nprobe, limit * refine)
    query = quantize_query(q16[0])
    approx = np.asarray(simsimd.cdist(query.codes, ivf.codes[candidates], metric="dot", threads=1,
                                      out_dtype="float32"))[0]
    approx *= ivf.scales[candidates]
    approx *= query.scale
    kept = np.argpartition(-approx, limit - 1)[:limit] if len(approx) > limit else np.arange(len(approx))
    if len(approx) > limit:  # a candidate left out scores below the limit-th best of these by more than the bound
        found = state.exact(q16, ivf.order[candidates[kept]])
        kept = np.flatnonzero(approx >= float(found.min()) - state.quantized.bound(query))
    rows = ivf.order[candidates[kept]]
    exact = state.exact(q16, rows)
    return RowScores(rows, exact), rows[np.lexsort((rows, -exact))][:limit]


def probe(ivf: Ivf, ranked: np.ndarray, mask: np.ndarray, nprobe: int, want: int) -> np.ndarray:
    """Positions (in `order`) of the readable rows of the lists in ranked order: at least nprobe lists, then twice as
    many at each step until `want` readable rows are held or every list is probed."""
    found, held, probed, step = [], 0, 0, nprobe
    while probed < len(ranked) and (probed < nprobe or held < want):
        lists = ranked[probed:probed + step]
        at = concatenated_ranges(ivf.offsets[lists], ivf.offsets[lists + 1])
        at = at[mask[ivf.order[at]]]
        found.append(at)
        held, probed, step = held + len(at), probed + len(lists), max(step, probed + len(lists))
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def ivf_arrays(ivf: Ivf | None) -> tuple[dict[str, np.ndarray], dict]:
    """A complete IVF's arrays and values for the read-state files (none without one)."""
    if ivf is None:
        return {}, {}
    return ({"ivf_centroids": ivf.centroids, "ivf_lists": ivf.lists, "ivf_order": ivf.order,
             "ivf_offsets": ivf.offsets, "ivf_codes": ivf.codes, "ivf_scales": ivf.scales}, {"ivf_trained": ivf.trained})


def ivf_of(arrays: dict[str, np.ndarray], meta: dict) -> Ivf | None:
    """The IVF of ivf_arrays' arrays (mapped from a file: no copy is made); None where the state has none."""
    if "ivf_centroids" not in arrays:
        return None
    return Ivf(arrays["ivf_centroids"], arrays["ivf_lists"], meta["ivf_trained"], arrays["ivf_order"],
               arrays["ivf_offsets"], arrays["ivf_codes"], arrays["ivf_scales"])
