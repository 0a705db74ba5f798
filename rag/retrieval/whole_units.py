"""The paper's LongRAG reader input: whole long units in MaxP rank order, each taken whole or not at all.

`longrag` (rag/retrieval/longrag.py) packs member documents by their own scores; this is the method of Jiang et al. 2024
as published, so the evaluation can compare the two. A unit is assembled from the members the caller may read
only, and a unit that does not fit the remaining budget is skipped and the next one tried.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from rag.retrieval.callers import Caller
from rag.retrieval.context import ContextItem, RetrievalResult
from rag.retrieval.dense import best_hit_per_member, maxp, nearest, rescore
from rag.retrieval.longrag import LongRAGConfig
from rag.retrieval.read_state import Snapshot
from rag.retrieval.request import Request, Tools
from rag.units.long_units import render_member, split_unit_key


@dataclass
class UnitRanking:
    """Readable units in MaxP order with their readable members; budget-independent."""

    ranked: dict[str, float]
    units: dict[str, list]
    hits: list
    seconds: float


def rank_units(snap: Snapshot, req: Request, tools: Tools, config: LongRAGConfig) -> UnitRanking:
    """Whole readable units by dense MaxP, exact over each candidate unit's readable sub-chunks."""
    start, caller, as_of = time.perf_counter(), req.caller, req.as_of
    query = tools.embedder.encode_query(req.question)
    hits, _ = nearest(snap, query, caller, config.overfetch, as_of)
    candidates = list(maxp(hits))[: config.max_units]
    hits += rescore(snap, query, caller, candidates, as_of)
    ranked = maxp([h for h in hits if h.unit_key in set(candidates)])
    return UnitRanking(ranked, _readable_units(snap, caller, list(ranked), as_of), hits, time.perf_counter() - start)


def pack_units(snap: Snapshot, ranking: UnitRanking, budget: int) -> RetrievalResult:
    """Whole units in rank order; a unit that does not fit what is left is skipped and the next one tried."""
    start = time.perf_counter()
    taken, used = [], 0
    for key in ranking.ranked:
        members = ranking.units.get(key, [])
        tokens = sum(m.tokens for m in members)
        if members and used + tokens <= budget:
            taken.append((key, members))
            used += tokens
    items = _render(snap, taken, best_hit_per_member(ranking.hits), ranking.ranked)
    return RetrievalResult("longrag-units", budget, items, {
        "units_ranked": len(ranking.ranked), "units_packed": len(taken), "subchunk_hits": len(ranking.hits),
        "retrieve_s": round(ranking.seconds + time.perf_counter() - start, 4)})


def _readable_units(snap: Snapshot, caller: Caller, unit_keys: list[str], as_of: datetime | None) -> dict[str, list]:
    """unit key → its members the caller may read, in unit order (a hit on one never authorises the rest)."""
    units: dict[str, list] = {}
    for m in snap.members(unit_keys, as_of):
        if caller.may_read(m.acl):
            units.setdefault(m.unit_key, []).append(m)
    return {k: sorted(v, key=lambda m: m.position) for k, v in units.items()}


def _render(snap: Snapshot, taken: list[tuple[str, list]], own: dict, ranked: dict[str, float]) -> list[ContextItem]:
    """One item per member, units kept together in rank order, members in unit order, headers visible."""
    texts = snap.texts([m for _, members in taken for m in members])
    items = []
    for key, members in taken:
        for m in members:
            title, text = texts[(m.doc_id, m.doc_version)]
            hit = own.get((key, m.doc_id, m.part))
            items.append(ContextItem(m.doc_id, m.doc_version, title,
                                     render_member(title, m.doc_id, m.doc_version, text[m.start:m.end], m.part),
                                     m.tokens, ((m.start, m.end),), round(ranked[key], 6), split_unit_key(key)[0],
                                     text[hit.start:hit.end] if hit else None, m.part))
    return items
