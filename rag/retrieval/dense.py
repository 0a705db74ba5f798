"""Sub-chunk search for LongRAG and short chunks: in-memory vectors of the snapshot's table version or a past one."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from itertools import repeat
from typing import NamedTuple

import numpy as np

from rag.retrieval.callers import Caller
from rag.retrieval.read_state import Snapshot
from rag.retrieval.row_mask import RowMask
from rag.retrieval.row_scores import RowScores
from rag.retrieval.vectors import VectorState, run_starts


class Hit(NamedTuple):
    """One scored sub-chunk (a tuple: a query builds hundreds, and a frozen dataclass costs ~5× more to build)."""

    unit_key: str
    doc_id: str
    part: int
    start: int
    end: int
    score: float


def rescore(snap: Snapshot, query: np.ndarray, caller: Caller, unit_keys: list[str],
            as_of: datetime | None = None) -> list[Hit]:
    """Second pass: every readable sub-chunk of the candidate units, scored exactly, so each member has its MaxP."""
    q = np.asarray(query, dtype=np.float32)
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    hits = []
    for key, rows in snap.unit_rows(unit_keys, as_of).items():
        scores = rows.vectors @ q
        hits += [Hit(key, rows.doc_ids[i], rows.parts[i], rows.starts[i], rows.ends[i], float(scores[i]))
                 for i in range(len(scores)) if caller.may_read(rows.acls[i])]
    return hits


def nearest(snap: Snapshot, query: np.ndarray, caller: Caller, limit: int,
            as_of: datetime | None = None) -> tuple[list[Hit], "Dense | None"]:
    """The nearest readable sub-chunks, scored in memory alike for the current snapshot and a past version; the
    scores come back for re-use, None for a past version (its candidate units are rescored from its rows)."""
    if as_of is None:
        return dense_hits(snap, query, caller, limit)
    return state_hits(snap.vectors_at(as_of), query, caller, limit)[0], None


def dense_hits(snap: Snapshot, query: np.ndarray, caller: Caller, limit: int) -> tuple[list[Hit], "Dense"]:
    """The nearest readable sub-chunks from the snapshot's in-memory vectors, and the scores for re-use."""
    return state_hits(snap.vectors, query, caller, limit)


def state_hits(state: VectorState, query: np.ndarray, caller: Caller, limit: int) -> tuple[list[Hit], "Dense"]:
    """The nearest sub-chunks of these in-memory rows that the caller may read, and the scores for re-use."""
    dense = state_search(state, query, caller, limit)
    return dense.hits(dense.near), dense


def state_search(state: VectorState, query: np.ndarray, caller: Caller, limit: int) -> "Dense":
    """The query's scores against in-memory rows (the snapshot's or a past version's) and its nearest readable rows
    (no Hit built)."""
    q16 = state.query16(query)
    scores, near = state.search(q16, caller.groups, limit)
    return Dense(state, scores, state.mask(caller.groups), near, q16)


@dataclass(frozen=True)
class Dense:
    """One query's cosine against the rows of the snapshot it needs, the caller's pre-filter mask and the nearest
    rows. Scores are exact where known and NaN elsewhere; unit_rows scores the rows it adds."""

    state: VectorState
    scores: RowScores
    mask: RowMask
    near: np.ndarray
    query: np.ndarray | None = None  # the (1, dimension) float16 query, for rows not scored yet

    def hits(self, rows: np.ndarray) -> list[Hit]:
        s = self.state
        return list(map(Hit._make, zip(s.unit_keys[rows].tolist(), s.doc_ids[rows].tolist(), s.parts[rows].tolist(),
                                       s.starts[rows].tolist(), s.ends[rows].tolist(), self.scores[rows].tolist())))

    def unit_rows(self, unit_keys: list[str]) -> np.ndarray:
        """Every readable sub-chunk of these units, in the units' order, each with its score."""
        rows = np.concatenate([r[self.mask[r]] for r in self.state.rows_of_unit.rows(unit_keys)]
                              or [np.zeros(0, dtype=np.int64)])
        if self.query is not None:
            todo = rows[np.isnan(self.scores[rows])]
            self.scores[todo] = self.state.exact(self.query, todo)
        return rows

    def best_per_member(self, rows: np.ndarray) -> "MemberHits":
        """best_hit_per_member over these rows taken as hits in order, as arrays (a Hit is built when asked for)."""
        return MemberHits.best(self.state, self.state.member_codes[rows], rows,
                               self.scores[rows].astype(np.float64))


@dataclass(frozen=True)
class MemberHits:
    """Each member's best sub-chunk (its row of the state and score), by member code: a hop scores hundreds of
    members, and only the few packed or seeding ones need their Hit."""

    state: VectorState
    codes: np.ndarray   # ascending member codes (VectorState.member_codes)
    rows: np.ndarray
    scores: np.ndarray

    @staticmethod
    def best(state: VectorState, codes: np.ndarray, rows: np.ndarray, scores: np.ndarray) -> "MemberHits":
        """Per member code, its best score; among equal scores its first in the given order."""
        order = np.lexsort((np.arange(len(rows)), -scores, codes))
        first = order[run_starts(codes[order])]
        return MemberHits(state, codes[first], rows[first], scores[first])

    def merged(self, later: "MemberHits") -> "MemberHits":
        """Each member's best under either hop's query; this hop's hit wins a tie."""
        return MemberHits.best(self.state, np.concatenate([self.codes, later.codes]),
                               np.concatenate([self.rows, later.rows]), np.concatenate([self.scores, later.scores]))

    def __len__(self) -> int:
        return len(self.codes)

    def get(self, key: tuple[str, str, int], default: Hit | None = None) -> Hit | None:
        found = self.get_many([key])[0]
        return default if found is None else found

    def get_many(self, keys: list[tuple[str, str, int]]) -> list[Hit | None]:
        """get() of each key, with one search for all (a packed result asks for a dozen)."""
        codes = np.fromiter(map(self.state.code_of.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
        if not len(self.codes):
            return [None] * len(keys)
        at = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
        s, rows, scores = self.state, self.rows[at].tolist(), self.scores[at].tolist()
        return [Hit(s.unit_keys[row], s.doc_ids[row], int(s.parts[row]), int(s.starts[row]), int(s.ends[row]), score)
                if hit else None for hit, row, score in zip((self.codes[at] == codes).tolist(), rows, scores)]


def maxp(hits: list[Hit]) -> dict[str, float]:
    """A unit's score is its best sub-chunk's score; ranking ties break by unit key."""
    best: dict[str, float] = {}
    for h in hits:
        best[h.unit_key] = max(best.get(h.unit_key, -1.0), h.score)
    return dict(sorted(best.items(), key=lambda kv: (-kv[1], kv[0])))


def best_hit_per_member(hits: list[Hit]) -> dict[tuple[str, str, int], Hit]:
    own: dict[tuple[str, str, int], Hit] = {}
    for h in hits:
        key = (h.unit_key, h.doc_id, h.part)
        if key not in own or h.score > own[key].score:
            own[key] = h
    return own
