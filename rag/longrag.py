"""LongRAG retrieval: pre-filtered sub-chunk search, MaxP per unit, units assembled at read time, packed to a budget."""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

import numpy as np

from rag.access import Caller
from rag.catalog import Catalog
from rag.context import ContextItem, RetrievalResult, pack
from rag.index import SubchunkIndex
from rag.tokens import TokenCounter
from rag.units import render_header, render_member


@dataclass(frozen=True)
class LongRAGConfig:
    overfetch: int = 200          # sub-chunks fetched before grouping by unit
    neighbour_penalty: float = 0.05  # a unit's members that no sub-chunk hit rank this far below the unit's score
    max_units: int = 40           # units considered for packing


@dataclass(frozen=True)
class Hit:
    unit_key: str
    doc_id: str
    part: int
    start: int
    end: int
    score: float


def search(index: SubchunkIndex, query_vector: np.ndarray, caller: Caller, limit: int) -> list[Hit]:
    table = index.search(query_vector, sorted(caller.groups), limit)
    cols = {name: table.column(name).to_pylist() for name in ("unit_key", "doc_id", "part", "char_start", "char_end")}
    scores = 1.0 - table.column("_distance").to_numpy()
    return [Hit(k, d, p, s, e, float(sc)) for k, d, p, s, e, sc in
            zip(cols["unit_key"], cols["doc_id"], cols["part"], cols["char_start"], cols["char_end"], scores)]


def maxp(hits: list[Hit]) -> dict[str, float]:
    """A unit's score is its best sub-chunk's score; ranking ties break by unit key."""
    best: dict[str, float] = {}
    for h in hits:
        best[h.unit_key] = max(best.get(h.unit_key, -1.0), h.score)
    return dict(sorted(best.items(), key=lambda kv: (-kv[1], kv[0])))


def longrag_retrieve(catalog: Catalog, index: SubchunkIndex, embed_query: Callable[[str], np.ndarray],
                     counter: TokenCounter, caller: Caller, question: str, budget: int,
                     config: LongRAGConfig = LongRAGConfig(), as_of: datetime | None = None) -> RetrievalResult:
    """Context for the question within the budget; with `as_of`, what was current then (index and catalog)."""
    timings: dict[str, float] = {}
    if as_of is not None:
        index = index.as_of(catalog.publish_at(as_of)[1])
    t = time.perf_counter()
    hits = search(index, embed_query(question), caller, config.overfetch)
    timings["search_s"] = time.perf_counter() - t
    t = time.perf_counter()
    units = dict(list(maxp(hits).items())[: config.max_units])
    candidates = _candidates(catalog, counter, caller, hits, units, config, as_of)
    items = pack(candidates, budget)
    timings["assemble_s"] = time.perf_counter() - t
    return RetrievalResult("longrag", budget, items, {"units_ranked": len(units), "subchunk_hits": len(hits),
                                                     **{k: round(v, 4) for k, v in timings.items()}})


def _candidates(catalog: Catalog, counter: TokenCounter, caller: Caller, hits: list[Hit],
                units: dict[str, float], config: LongRAGConfig, as_of: datetime | None) -> list[ContextItem]:
    """Whole member documents of the ranked units, readable ones only, ordered for packing.

    A member's rank is its own best sub-chunk score; a member no sub-chunk hit ranks just below its unit
    (LongRAG's premise: linked documents carry the other hops), so small budgets keep the strongest
    documents of several units instead of one unit's first pages.
    """
    own: dict[tuple[str, str, int], Hit] = {}
    for h in hits:
        key = (h.unit_key, h.doc_id, h.part)
        if key not in own or h.score > own[key].score:
            own[key] = h
    scored = []
    for unit_key, position, doc_id, version, part, start, end, title, text, acl in catalog.current_members(list(units), as_of):
        if not caller.may_read(acl):
            continue  # a hit on one member never authorises the rest of its unit
        hit = own.get((unit_key, doc_id, part))
        score = hit.score if hit else units[unit_key] - config.neighbour_penalty
        matched = text[hit.start:hit.end] if hit else None
        block = render_member(title, doc_id, version, text[start:end], part)
        scored.append((-score, unit_key, position, ContextItem(
            doc_id, version, title, block, 0, ((start, end),), round(score, 6), unit_key.split("@")[0], matched)))
    scored.sort(key=lambda s: s[:3])
    blocks = [s[3] for s in scored]
    tokens = counter.count([b.text for b in blocks])
    return [ContextItem(**{**vars(b), "tokens": int(n)}) for b, n in zip(blocks, tokens)]


def shortchunk_retrieve(catalog: Catalog, index: SubchunkIndex, embed_query: Callable[[str], np.ndarray],
                        counter: TokenCounter, caller: Caller, question: str, budget: int,
                        config: LongRAGConfig = LongRAGConfig(), as_of: datetime | None = None) -> RetrievalResult:
    """The baseline: the top sub-chunks themselves, each with its document header, packed into the budget."""
    if as_of is not None:
        index = index.as_of(catalog.publish_at(as_of)[1])
    t = time.perf_counter()
    hits = search(index, embed_query(question), caller, config.overfetch)
    members = {(r[0], r[2], r[4]): r for r in catalog.current_members(sorted({h.unit_key for h in hits}), as_of)}
    blocks = []
    for h in hits:
        row = members.get((h.unit_key, h.doc_id, h.part))
        if row is None or not caller.may_read(row[9]):
            continue
        _, _, doc_id, version, part, _, _, title, text, _ = row
        block = render_header(title, doc_id, version, part) + text[h.start:h.end] + "\n"
        blocks.append(ContextItem(doc_id, version, title, block, 0, ((h.start, h.end),), round(h.score, 6),
                                  h.unit_key.split("@")[0], text[h.start:h.end]))
    tokens = counter.count([b.text for b in blocks])
    items = pack([ContextItem(**{**vars(b), "tokens": int(n)}) for b, n in zip(blocks, tokens)], budget)
    return RetrievalResult("shortchunk", budget, items, {"subchunk_hits": len(hits),
                                                        "retrieve_s": round(time.perf_counter() - t, 4)})
