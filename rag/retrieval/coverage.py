"""Hop coverage in the embedder's space: members ordered so that each next one matches what of its query the
members ahead do not match yet.

A member's dense share is its best sub-chunk's cosine with its hop's query, q·v. The members placed ahead span
part of the space; the query's projection on that span (P q, by Gram–Schmidt over their vectors) is answered, so
a member keeps only its match to the rest, (q − P q)·v: a paraphrase of a placed member gives way to one that
matches another part of the question. Its other shares (BM25, the link boost) stay as they were, and no weight
is added. "hop" orders each hop's list on its own, "first" the first hop's only (the question's own query);
"merged" keeps the hops' rank-by-rank round robin but lets
every pick see the members ahead in the merged list, from any hop (the seeds among them).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from rag.retrieval.dense import MemberHits
from rag.retrieval.members import RankedRows
from rag.retrieval.read_state import Snapshot

COVER_MODES = ("none", "hop", "first", "merged")
# Members placed greedily; the rest follow in their lists' order. 1K–4K budgets pack ~8–32 members, so 64 reaches
# past the largest, and each pick costs one product over the candidates.
COVER_DEPTH = 64


def member_vectors(snap: Snapshot, own: MemberHits, ranked: RankedRows) -> np.ndarray:
    """Each ranked member's best sub-chunk vector (unit length, float32); zeros for a member without one."""
    table_rows = snap.code_rows[own.codes]
    known = table_rows >= 0
    keys, state_rows = table_rows[known], own.rows[known]
    order = np.argsort(keys)
    keys, state_rows = keys[order], state_rows[order]
    out = np.zeros((len(ranked.rows), own.state.matrix.shape[1]), dtype=np.float32)
    if not len(keys):
        return out
    at = np.minimum(np.searchsorted(keys, ranked.rows), len(keys) - 1)
    found = keys[at] == ranked.rows
    out[found] = own.state.matrix[state_rows[at[found]]]
    return out


def covering_merge(lists: list[RankedRows], queries: list[np.ndarray], vectors: list[np.ndarray],
                   then: Callable[[list[RankedRows]], RankedRows], depth: int = COVER_DEPTH) -> RankedRows:
    """The lists (rows of one member table) taken rank by rank, each list's next member the best of its own once
    the part of its query spanned by the members placed so far is taken off; first occurrence kept, as
    longrag.interleave. After `depth` picks, what is left of the lists is merged by `then`."""
    table = lists[0].table
    codes = [table.entry_codes[x.rows] for x in lists]
    units = [q / max(float(np.linalg.norm(q)), 1e-12) for q in np.asarray(queries, dtype=np.float32)]
    penalty = [np.zeros(len(x)) for x in lists]
    left = [np.ones(len(x), dtype=bool) for x in lists]
    basis = np.zeros((0, vectors[0].shape[1] if vectors else 0), dtype=np.float32)
    placed: set[int] = set()
    rows, scores = [], []
    while len(placed) < depth and any(m.any() for m in left):
        for k, x in enumerate(lists):
            pick = _next(x.scores - penalty[k], left[k])
            if pick is None or len(placed) == depth:
                continue
            code = int(codes[k][pick])
            placed.add(code)
            for j in range(len(lists)):  # every list's copies of the member go with it
                left[j] &= codes[j] != code
            rows.append(int(x.rows[pick]))
            scores.append(float(x.scores[pick]))
            basis = _grow(basis, vectors[k][pick], units, vectors, penalty)
    rest = then([RankedRows(table, x.rows[m], x.scores[m]) for x, m in zip(lists, left)])
    return RankedRows(table, np.concatenate([np.asarray(rows, dtype=np.int64), rest.rows]),
                      np.concatenate([np.asarray(scores, dtype=np.float64), rest.scores]))


def _next(adjusted: np.ndarray, left: np.ndarray) -> int | None:
    """The best remaining position (the earliest of equals), None when none is left."""
    if not left.any():
        return None
    return int(np.argmax(np.where(left, adjusted, -np.inf)))


def _grow(basis: np.ndarray, v: np.ndarray, queries: list[np.ndarray], vectors: list[np.ndarray],
          penalty: list[np.ndarray]) -> np.ndarray:
    """Add v's direction beyond the basis (Gram–Schmidt) and each list's answered match along it:
    (q·e)(v_i·e) for every candidate i, summed over the basis, is (P q)·v_i."""
    e = v - basis.T @ (basis @ v) if len(basis) else v.copy()
    norm = float(np.linalg.norm(e))
    if norm < 1e-6:  # inside the span already (or a member without a vector): nothing new is answered
        return basis
    e /= norm
    for q, vs, pen in zip(queries, vectors, penalty):
        pen += float(q @ e) * (vs @ e)
    return np.vstack([basis, e])


def covered(snap: Snapshot, lists: list, queries: list[np.ndarray], own, mode: str,
            then: Callable[[list[RankedRows]], RankedRows]):
    """The hops' lists merged under `mode`: "hop" orders each list alone ("first" the first one), then `then` merges
    them; "merged" orders
    them as one. A past version's lists (entries, not rows of one table) are merged by `then` as they are."""
    if mode not in COVER_MODES:
        raise ValueError(f"unknown cover mode {mode!r}; choose one of {', '.join(COVER_MODES)}")
    rows = all(isinstance(x, RankedRows) for x in lists) and len({id(x.table) for x in lists}) == 1
    if mode == "none" or not rows or not isinstance(own, MemberHits):
        return then(lists)
    if mode in ("hop", "first"):
        alone = lists if mode == "hop" else lists[:1]
        return then([covering_merge([x], [q], [member_vectors(snap, own, x)], then) for x, q in zip(alone, queries)]
                    + lists[len(alone):])
    return covering_merge(lists, queries, [member_vectors(snap, own, x) for x in lists], then)
