"""The serving copy of a snapshot's sub-chunk vectors: one unit-length float16 matrix in memory per snapshot.

LanceDB stays the index of record (what is published and versioned); this copy is derived from the table
version a snapshot pins (or an as-of read asks for), and the ACL pre-filter is a boolean mask, computed once per
group set. The matrix is half precision (SIMD kernels accumulate in float32) and its rows lie grouped by ACL set: a
caller's readable rows are a few contiguous ranges, and only those are read. A search first reads an int8 copy of
them (rag.retrieval.int8_rows: half the bytes, integer kernels), then scores in float16 every row that the int8
scores' error bound cannot rule out, so it returns what one float16 pass would (past RAG_ANN_MIN_ROWS rows, it walks
an IVF instead: rag.retrieval.ivf). Rows name no unit: the snapshot's unit membership places each in its unit
(rag.store.row_units). A unit version's rows never change, so the next snapshot's copy keeps every row of the previous
one where it lies (mapped from its files), marks the rows of units it no longer holds as dead (no caller reads them),
and appends the new units' rows as a segment of their own (rag.retrieval.segments): building and writing it costs
what changed. Once dead rows or segments pile up (MAX_DEAD_SHARE, MAX_SEGMENTS), the live rows are copied into one.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import simsimd

from rag.retrieval.int8_rows import Int8Rows, appended, concat, empty, gathered, quantize, quantize_query
from rag.retrieval.ivf import Ivf, ann_min_rows, ann_search, ivf_arrays, ivf_of, joined, ready
from rag.retrieval.member_codes import MemberCodes, member_numbering
from rag.retrieval.row_mask import RowMask, readable_sets, remember, row_mask
from rag.retrieval.row_scores import RowScores
from rag.retrieval.segments import Segments, as_segments, segment_bounds
from rag.retrieval.state_files import Arrays
from rag.retrieval.strings import (
    Column,
    RowsByKey,
    Strings,
    as_column,
    concat_columns,
    rows_by_key,
    strings_of,
)
from rag.store.index import SubchunkIndex, row_columns
from rag.store.row_units import Membership, place

MAX_RANGES = 64   # a caller readable in more separate row ranges than this has every row scored in one pass
BLOCK_ROWS = 8_192  # rows normalised at a time: no float32 copy of a whole table, nor of a large block
MAX_SEGMENTS = 8      # past this many segments, or this share of dead rows, the next state copies its live rows
MAX_DEAD_SHARE = 0.2  # into one: every range read is split at segments, and a dead row is read and thrown away


def first_seen_codes(codes: dict, keys: Iterable, count: int) -> np.ndarray:
    """One number per distinct key, in order of first appearance; `codes` keeps the key → number map."""
    return np.fromiter((codes.setdefault(k, len(codes)) for k in keys), dtype=np.int64, count=count)


def run_starts(ordered: np.ndarray) -> np.ndarray:
    """True where a sorted array's value differs from the one before (the first of each run of equal values)."""
    out = np.ones(len(ordered), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=out[1:])
    return out


@dataclass
class VectorState:
    """Every row of one table version: where it lies, who may read it, its unit-length vector. Its arrays may be
    mapped from a read-state file (rag.retrieval.state_files); strings are columns of codes (rag.retrieval.strings)."""

    matrix: np.ndarray | Segments  # (rows, dimension) float16, unit length; in each segment, in order of acl_ids
    unit_keys: Column             # object arrays of str are taken too, and coded
    doc_ids: Column
    parts: np.ndarray             # int32
    starts: np.ndarray            # int32
    ends: np.ndarray              # int32
    acl_ids: np.ndarray           # int32: index into acl_sets, ascending
    acl_sets: list[frozenset[str]]
    int8: Int8Rows | None = None  # the first pass's copy of matrix (built on first search when not given)
    ann: Ivf | None = None        # the IVF of a state past ann_min_rows() rows (rag.retrieval.ivf)
    live: np.ndarray | None = None  # bool per row: False for a row of a unit the snapshot no longer holds (None: all)
    _masks: dict = field(default_factory=dict, repr=False)
    _ranges: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self):
        self.unit_keys, self.doc_ids = as_column(self.unit_keys), as_column(self.doc_ids)
        if self.live is not None and self.live.all():
            self.live = None

    @property
    def rows_of_unit(self) -> RowsByKey:
        """Unit key → its rows (built on first use, then kept)."""
        if not hasattr(self, "_rows_of_unit"):
            self._rows_of_unit = rows_by_key(self.unit_keys)
        return self._rows_of_unit

    @property
    def member_codes(self) -> np.ndarray:
        """Per row, a number shared by the rows of one (unit key, doc_id, part) (built on first use, then kept)."""
        if not hasattr(self, "_member_codes"):
            found, codes = member_numbering(self.unit_keys, self.doc_ids, self.parts)
            self._code_of = codes  # first: a thread that sees _member_codes finds _code_of too
            self._member_codes = found
        return self._member_codes

    @property
    def code_of(self) -> MemberCodes:
        """(unit key, doc_id, part) → its member code (see member_codes)."""
        self.member_codes
        return self._code_of

    def __len__(self) -> int:
        return len(self.unit_keys)

    def mask(self, groups: frozenset[str]) -> RowMask:
        """Live rows whose ACL admits one of the groups (rule 1's pre-filter); the readable ACL sets are kept per
        group set, never a row array."""
        return row_mask(self._masks, self._lock, self.acl_sets, self.acl_ids, groups, self.live)

    def scores(self, query: np.ndarray, groups: frozenset[str] | None = None) -> np.ndarray:
        """Cosine of the query with every row the groups may read (every row if no groups are given); rows they
        may not read are not computed and score -inf."""
        q16 = self.query16(query)
        out = np.full(len(self), -np.inf, dtype=np.float32)
        for lo, hi in self.ranges(groups):
            out[lo:hi] = dot(q16, self.matrix[lo:hi])
        if self.live is not None:
            out[~self.live] = -np.inf
        return out

    def query16(self, query: np.ndarray) -> np.ndarray:
        """The query at unit length in float16, as a (1, dimension) row: what every row is scored against."""
        q = np.asarray(query, dtype=np.float32)
        if len(q) != self.matrix.shape[1]:
            raise ValueError(f"the query vector has {len(q)} dimensions but the index holds {self.matrix.shape[1]}; "
                             f"embed questions with the workspace's embedder")
        return (q / max(float(np.linalg.norm(q)), 1e-12)).astype(np.float16)[None, :]

    def exact(self, q16: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """These rows' scores, the same as scores() gives them (the kernel scores each row on its own)."""
        return dot(q16, self.matrix[rows]) if len(rows) else np.zeros(0, dtype=np.float32)

    def search(self, q16: np.ndarray, groups: frozenset[str], limit: int) -> tuple[RowScores, np.ndarray]:
        """nearest(scores(query), mask(groups), limit) without a float16 pass over every readable row: an int8 pass,
        then float16 scores for the rows it cannot rule out. Returns the scores (exact on the rows scored in
        float16, NaN on the rest) and the nearest rows."""
        found = ann_search(self, q16, groups, limit)  # None below RAG_ANN_MIN_ROWS rows: the exact pass below
        if found is not None:
            return found
        if limit <= 0:
            return RowScores(), np.zeros(0, dtype=np.int64)
        int8, mask, spans = self.quantized, self.mask(groups), self.ranges(groups)
        query = quantize_query(q16[0])
        approx = np.concatenate([readable_only(int8.scores(query, lo, hi), mask[lo:hi]) for lo, hi in spans]
                                or [np.zeros(0, dtype=np.float32)])
        kept = top_positions(approx, limit)
        if len(kept) >= limit:  # a row left out now scores below the limit-th best of these, so of all rows
            found = self.exact(q16, span_rows(spans, kept))
            cut = float(np.partition(found, len(found) - limit)[len(found) - limit]) - int8.bound(query)
            kept = np.flatnonzero(approx >= cut)
        rows = span_rows(spans, kept)
        exact = self.exact(q16, rows)
        return RowScores(rows, exact), rows[np.lexsort((rows, -exact))][:limit]

    @property
    def quantized(self) -> Int8Rows:
        if self.int8 is None:
            self.int8 = quantize(self.matrix)
        return self.int8

    def ranges(self, groups: frozenset[str] | None) -> list[tuple[int, int]]:
        """The row ranges that hold every row the groups may read, none across two segments (a segment's rows whole
        when its ranges are many, or no groups are given)."""
        found = self._ranges.get(groups)
        if found is None:
            bounds = segment_bounds(self.matrix)
            found = [(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
            if groups is not None:
                readable = np.flatnonzero(readable_sets(self.acl_sets, groups))
                found = [r for lo, hi in found for r in set_ranges(self.acl_ids, lo, hi, readable, len(self.acl_sets))]
            found = remember(self._ranges, self._lock, groups, found)
        return found

    def nearest(self, scores: np.ndarray, mask: np.ndarray, limit: int) -> np.ndarray:
        """The readable rows with the highest scores, best first (ties by row order)."""
        readable = np.flatnonzero(mask)
        if len(readable) > limit:
            # argpartition picks any of the rows tied at the cut; every tied row goes on, so the earliest wins
            cut = scores[readable][np.argpartition(-scores[readable], limit - 1)[limit - 1]]
            readable = readable[scores[readable] >= cut]
        return readable[np.lexsort((readable, -scores[readable]))][:limit]


def set_ranges(acl_ids: np.ndarray, lo: int, hi: int, readable: np.ndarray, sets: int) -> list[tuple[int, int]]:
    """The ranges of rows lo..hi (in order of their ACL set) whose set is readable; lo..hi whole past MAX_RANGES."""
    bounds = lo + np.searchsorted(acl_ids[lo:hi], np.arange(sets + 1))
    found: list[tuple[int, int]] = []
    for set_id in readable:
        start, end = int(bounds[set_id]), int(bounds[set_id + 1])
        if found and found[-1][1] == start:
            found[-1] = (found[-1][0], end)
        elif end > start:
            found.append((start, end))
    return found if len(found) <= MAX_RANGES else [(lo, hi)]


def readable_only(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The scores, -inf where the mask is False (a span of rows wider than the readable ones)."""
    if not mask.all():
        scores[~mask] = -np.inf
    return scores


def top_positions(values: np.ndarray, k: int, floor: float = -np.inf) -> np.ndarray:
    """Positions (ascending) of at least k of the values above `floor`, none with a value below one left out; every
    one above `floor` when fewer are. A strided sample's cut first: a whole selection costs a third of a pass."""
    if len(values) > 16 * k:
        sample = values[::8]
        sample = sample[sample > floor]  # BM25 scores are mostly 0: a selection among equal values is slow
        rank = len(sample) - -(-5 * k // 32)  # the sample's 1.25 k / 8-th largest: ~1.25 k values reach it
        if rank >= 0:
            found = np.flatnonzero(values >= np.partition(sample, rank)[rank])
            if len(found) >= k:
                return found
    above = np.flatnonzero(values > floor)
    if len(above) <= k:
        return above
    kept = values[above]
    return above[kept >= np.partition(kept, len(kept) - k)[len(kept) - k]]


def span_rows(spans: list[tuple[int, int]], at: np.ndarray) -> np.ndarray:
    """The rows at these positions of the spans' rows taken one after the other."""
    lo = np.array([lo for lo, _ in spans], dtype=np.int64)
    lengths = np.array([hi - lo for lo, hi in spans], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    which = np.searchsorted(starts, at, side="right") - 1
    return lo[which] + at - starts[which]


def dot(query: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The (1, dimension) query's dot product with each row, accumulated in float32. simsimd 6.5's cdist with `out=`
    returns None without owning a reference to it, so a process would abort after ~10⁵ calls: it returns its own."""
    return np.asarray(simsimd.cdist(query, rows, metric="dot", threads=1, out_dtype="float32"))[0]


def load_state(index: SubchunkIndex, previous: VectorState | None = None,
               membership: Membership | None = None) -> VectorState:
    """Every row of the index's table version that a unit of `membership` holds, re-using the rows of units the
    previous state already holds."""
    dataset = index.table.to_lance()
    order, unit_keys = place(dataset.to_table(columns=row_columns(dataset.schema)), membership)
    if previous is None or not len(previous):
        return _by_acl(_read(index, dataset, order, unit_keys))
    have = previous.rows_of_unit
    placed = have.strings.codes(unit_keys.tolist())
    live = np.isin(previous.unit_keys.codes, np.unique(placed[placed >= 0]))
    new = (placed < 0) | (np.diff(have.bounds)[np.maximum(placed, 0)] == 0)
    fresh = _read(index, dataset, order[new], unit_keys[new])
    segments = len(segment_bounds(previous.matrix)) - 1 + bool(len(fresh))
    if segments > MAX_SEGMENTS or np.count_nonzero(~live) > MAX_DEAD_SHARE * len(live):
        return _by_acl(_concat(previous, fresh, np.flatnonzero(live)))
    return _appended(previous, live, fresh)


def _read(index: SubchunkIndex, dataset, rows: np.ndarray, unit_keys: np.ndarray) -> VectorState:
    """These rows of the table version (by position), in this order, with their unit keys."""
    if not len(rows):
        return _empty(index.dimension)
    data, vectors, at = index.rows_at(rows, ["doc_id", "part", "char_start", "char_end", "acl"], dataset)
    matrix = _unit_rows(vectors, index.dimension, at)
    acl_sets: dict[frozenset[str], int] = {}
    acl_ids = np.fromiter((acl_sets.setdefault(frozenset(a), len(acl_sets)) for a in data.column("acl").to_pylist()),
                          dtype=np.int32, count=data.num_rows)
    return VectorState(matrix, strings_of(unit_keys.tolist()), strings_of(data.column("doc_id").to_pylist()),
                       _ints(data, "part"), _ints(data, "char_start"), _ints(data, "char_end"), acl_ids, list(acl_sets),
                       quantize(matrix))


def _unit_rows(column: pa.Array, dimension: int, at: np.ndarray) -> np.ndarray:
    """The stored vectors (int8, float16 or float32) at these rows as a float16 matrix, each row scaled to unit length
    in float32 first, a block at a time."""
    stored = column.flatten().to_numpy(zero_copy_only=False).reshape(-1, dimension)
    out = np.empty((len(at), dimension), dtype=np.float16)
    for lo in range(0, len(at), BLOCK_ROWS):
        block = stored[at[lo:lo + BLOCK_ROWS]].astype(np.float32, copy=False)
        out[lo:lo + BLOCK_ROWS] = block / np.maximum(np.linalg.norm(block, axis=1, keepdims=True), 1e-12)
    return out


def _by_acl(state: VectorState) -> VectorState:
    """The rows grouped by ACL set (stable: within a set, in their order)."""
    if len(state) and np.any(np.diff(state.acl_ids) < 0):
        return _take(state, np.argsort(state.acl_ids, kind="stable"))
    return state


def _ints(data: pa.Table, name: str) -> np.ndarray:
    return data.column(name).to_numpy().astype(np.int32)


def _empty(dimension: int) -> VectorState:
    none = np.zeros(0, dtype=np.int32)
    return VectorState(np.zeros((0, dimension), dtype=np.float16), strings_of([]), strings_of([]), none, none, none,
                       none, [], empty(dimension))


def _take(state: VectorState, rows: np.ndarray) -> VectorState:
    return VectorState(state.matrix[rows], state.unit_keys.take(rows), state.doc_ids.take(rows), state.parts[rows],
                       state.starts[rows], state.ends[rows], state.acl_ids[rows], state.acl_sets,
                       state.quantized.take(rows), state.ann.take(rows) if state.ann is not None else None,
                       _live(state)[rows])


def _concat(a: VectorState, b: VectorState, rows: np.ndarray | None = None) -> VectorState:
    """a's rows (those at `rows`, in that order, or all of them), then b's, with b's ACL sets renumbered into a's."""
    rows = np.arange(len(a)) if rows is None else rows
    sets, b_ids = _renumbered(a, b)
    return VectorState(gathered(a.matrix, rows, b.matrix), concat_columns([a.unit_keys.take(rows), b.unit_keys]),
                       concat_columns([a.doc_ids.take(rows), b.doc_ids]), gathered(a.parts, rows, b.parts),
                       gathered(a.starts, rows, b.starts), gathered(a.ends, rows, b.ends),
                       gathered(a.acl_ids, rows, b_ids).astype(np.int32), sets,
                       concat(a.quantized, b.quantized, rows),
                       joined(a.ann.take(rows) if a.ann is not None else None, b.ann, len(rows), len(b)),
                       np.concatenate([_live(a)[rows], _live(b)]))


def _appended(a: VectorState, live: np.ndarray, b: VectorState) -> VectorState:
    """Every row of a where it lies (alive where `live` says), then b's rows as a segment of their own, in order of
    their ACL sets renumbered into a's."""
    sets, b_ids = _renumbered(a, b)
    order = np.argsort(b_ids, kind="stable")
    b, b_ids = _take(b, order), b_ids[order]
    matrix = as_segments(a.matrix).appended(b.matrix) if len(b) else a.matrix
    return VectorState(matrix, concat_columns([a.unit_keys, b.unit_keys]), concat_columns([a.doc_ids, b.doc_ids]),
                       *(np.concatenate([getattr(a, f), getattr(b, f)]) for f in ("parts", "starts", "ends")),
                       np.concatenate([a.acl_ids, b_ids]).astype(np.int32), sets, appended(a.quantized, b.quantized),
                       joined(a.ann, b.ann, len(a), len(b)), np.concatenate([live, _live(b)]))


def _renumbered(a: VectorState, b: VectorState) -> tuple[list[frozenset[str]], np.ndarray]:
    """a's ACL sets and b's new ones after them; b's rows' set ids in that numbering."""
    sets = {s: i for i, s in enumerate(a.acl_sets)}
    remap = np.array([sets.setdefault(s, len(sets)) for s in b.acl_sets], dtype=np.int32)
    return list(sets), remap[b.acl_ids] if len(b.acl_ids) else b.acl_ids


def _live(state: VectorState) -> np.ndarray:
    return state.live if state.live is not None else np.ones(len(state), dtype=bool)


def union(states: list[VectorState], dimension: int) -> VectorState:
    """Several partitions' states searched as one."""
    out = _empty(dimension)
    for state in states:
        out = _concat(out, state)
    return _by_acl(out)


def vector_arrays(state: VectorState) -> Arrays:
    """The state as arrays for a read-state file, with its unit rows and member codes built."""
    int8, units, codes = state.quantized, state.rows_of_unit, state.code_of
    ann, ann_meta = ivf_arrays(ready(state) if len(state) >= max(ann_min_rows(), 1) else None)
    live = {"live": state.live} if state.live is not None else {}
    return Arrays({"matrix": as_segments(state.matrix), "unit_codes": state.unit_keys.codes,
                   "units": state.unit_keys.strings.table, **live,
                   "doc_codes": state.doc_ids.codes, "docs": state.doc_ids.strings.table, "parts": state.parts,
                   "starts": state.starts, "ends": state.ends, "acl_ids": state.acl_ids,
                   "int8_codes": as_segments(int8.codes),
                   "int8_scales": int8.scales, "int8_errors": int8.errors, "int8_norms": int8.norms,
                   "unit_order": units.order, "unit_bounds": units.bounds, "member_codes": state.member_codes,
                   "member_keys": codes.packed, "member_key_codes": codes.codes, "member_first_rows": codes.first_rows,
                   **ann}, {"acl_sets": [sorted(a) for a in state.acl_sets], "parts_span": codes.parts, **ann_meta})


def vector_state(found: Arrays) -> VectorState:
    """The state of vector_arrays' arrays (mapped from a file: no copy is made)."""
    units, docs = Column(found["unit_codes"], Strings(found["units"])), Column(found["doc_codes"], Strings(found["docs"]))
    state = VectorState(found["matrix"], units, docs, found["parts"], found["starts"], found["ends"], found["acl_ids"],
                        [frozenset(a) for a in found.meta["acl_sets"]],
                        Int8Rows(found["int8_codes"], found["int8_scales"], found["int8_errors"], found["int8_norms"]),
                        ivf_of(found.arrays, found.meta), found.arrays.get("live"))
    state._rows_of_unit = RowsByKey(units.strings, found["unit_order"], found["unit_bounds"])
    state._code_of = MemberCodes(units.strings, docs.strings, found["member_keys"], found["member_key_codes"],
                                 found["member_first_rows"], found.meta["parts_span"])
    state._member_codes = found["member_codes"]
    return state
