"""LongRAG's hop lists merged into one ranking: rank by rank, by best score, or by reciprocal rank fusion.

Each list holds only members the caller may read (`longrag._candidates` filters them), and every rule returns
entries of the lists, so no rule can add a member that none of the lists held.
"""
from __future__ import annotations

import numpy as np

from rag.retrieval.context import Candidate, ContextItem
from rag.retrieval.members import RankedRows
from rag.retrieval.vectors import first_seen_codes, run_starts

Ranking = RankedRows | list[Candidate | ContextItem]  # rows of one member table, or entries (a past version's hops)


def merge_hops(lists: list[Ranking], seeded: list[tuple[Ranking, str] | None], rule: str, k: int) -> Ranking:
    """The hops' lists as one by `rule` ("interleave", "max" or "rrf" with constant `k`); `seeded[j]` is the list
    and document that list j's branch was seeded from (None for the question's list), read by "rrf" only."""
    if rule == "interleave":
        return interleave(lists)
    if rule == "max":
        return by_best_score(lists)
    if rule == "rrf":  # a branch starts at its seed, so the question's best document holds rank 0 of two lists
        return reciprocal_rank([_started(seed, ranked) for seed, ranked in zip(seeded, lists)], k)
    raise ValueError(f"hop_merge {rule!r}: expected 'interleave', 'max' or 'rrf'")


def _seed_entry(source: Ranking, doc_id: str) -> Ranking:
    """The source list's entry that seeded a branch (next_query's: the document's first indexed entry), as a list."""
    if isinstance(source, RankedRows):
        at = np.flatnonzero(source.table.doc_codes[source.rows] == source.table.doc_code_of[doc_id])[:1]
        return RankedRows(source.table, source.rows[at], source.scores[at])
    return [next(i for i in source if i.unit_id is not None and i.doc_id == doc_id)]


def by_best_score(lists: list[Ranking]) -> Ranking:
    """Every hop's members by their best score under any hop (scores of one scale: cosine plus shares of BM25); a
    member keeps its first entry with that score, and equal scores keep the order of first appearance."""
    flat = _entry_codes(lists)
    score = -np.array([i.score for ranked in lists for i in ranked]) if len(flat) else np.zeros(0)  # rounded
    order = np.lexsort((np.arange(len(flat)), score, flat))
    best = order[run_starts(flat[order])]
    _, first_seen = np.unique(flat, return_index=True)  # per code, ascending, as best is
    return _pick(lists, best[np.lexsort((first_seen, score[best]))])


def interleave(lists: list[Ranking]) -> Ranking:
    """Rank-by-rank round robin over the hops' lists, first occurrence kept: no weight between hops to tune."""
    flat = _entry_codes(lists)
    order = _interleaved(lists)
    _, first = np.unique(flat[order], return_index=True)
    return _pick(lists, order[np.sort(first)])


def reciprocal_rank(lists: list[Ranking], k: int) -> Ranking:
    """Members by their sum of 1 / (k + rank) over the lists holding them (Cormack et al. 2009): one that two lists
    found rises above one that a single list found; equal sums keep the interleave's order, and its first entry."""
    rank, hop = _ranks(lists)
    codes, code = np.unique(_entry_codes(lists), return_inverse=True)
    _, once = np.unique(hop * len(codes) + code, return_index=True)  # a list counts a member once, at its best rank
    # Rounded so that equal sums of the same terms added in another order tie exactly.
    fused = np.round(np.bincount(code[once], 1.0 / (k + rank[once]), len(codes)), 12)
    order = _interleaved(lists)
    _, first = np.unique(code[order], return_index=True)  # per member (ascending code): its first place in that order
    return _pick(lists, order[first][np.lexsort((first, -fused))])


def _interleaved(lists: list[Ranking]) -> np.ndarray:
    """Positions in the lists taken as one, in round-robin order: every list's rank 0, then every rank 1, ..."""
    rank, hop = _ranks(lists)
    return np.lexsort((hop, rank))


def _ranks(lists: list[Ranking]) -> tuple[np.ndarray, np.ndarray]:
    """Every entry's rank in its list (from 0) and its list's index, in list order."""
    sizes = [len(x) for x in lists]
    rank = np.concatenate([np.arange(n) for n in sizes] or [np.zeros(0, np.int64)])
    return rank, np.repeat(np.arange(len(lists)), sizes)


def _started(seed: tuple[Ranking, str] | None, ranked: Ranking) -> Ranking:
    """A branch's list with its seed's entry in front (rank 0); rows stay rows when both are rows of one table."""
    if seed is None:
        return ranked
    head = _seed_entry(*seed)
    if _one_table([head, ranked]):
        return RankedRows(ranked.table, np.concatenate([head.rows, ranked.rows]),
                          np.concatenate([head.scores, ranked.scores]))
    return [*head, *ranked]


def _entry_codes(lists: list[Ranking]) -> np.ndarray:
    """Every entry of the lists, in list order, as one number per (doc_id, doc_version, ranges): packing's identity."""
    if _one_table(lists):
        return lists[0].table.entry_codes[np.concatenate([x.rows for x in lists])]
    keys = [(i.doc_id, i.doc_version, i.ranges) for ranked in lists for i in ranked]
    return first_seen_codes({}, keys, len(keys))


def _one_table(lists: list[Ranking]) -> bool:
    """Whether the lists are rows of one member table (the current snapshot's; a past version's differ per hop)."""
    return bool(lists) and all(isinstance(x, RankedRows) for x in lists) and len({id(x.table) for x in lists}) == 1


def _pick(lists: list[Ranking], chosen: np.ndarray) -> Ranking:
    """The entries at these positions of the lists taken as one (ranked rows stay rows)."""
    if _one_table(lists):
        return RankedRows(lists[0].table, np.concatenate([x.rows for x in lists])[chosen],
                          np.concatenate([x.scores for x in lists])[chosen])
    flat = [i for ranked in lists for i in ranked]
    return [flat[i] for i in chosen.tolist()]
