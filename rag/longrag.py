"""LongRAG retrieval: pre-filtered sub-chunk search, MaxP per unit, units assembled at read time, packed to a budget."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable

import numpy as np

from rag.access import Caller
from rag.catalog import Catalog
from rag.context import ContextItem, RetrievalResult, pack, pack_lazily
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
    items = _with_text(catalog, pack(_candidates(catalog, caller, hits, units, config, as_of), budget), hits)
    timings["assemble_s"] = time.perf_counter() - t
    return RetrievalResult("longrag", budget, items, {"units_ranked": len(units), "subchunk_hits": len(hits),
                                                     **{k: round(v, 4) for k, v in timings.items()}})


def _candidates(catalog: Catalog, caller: Caller, hits: list[Hit], units: dict[str, float],
                config: LongRAGConfig, as_of: datetime | None) -> list[ContextItem]:
    """Whole member documents of the ranked units, readable ones only, ordered for packing (text not yet read).

    A member's rank is its own best sub-chunk score; a member no sub-chunk hit ranks just below its unit
    (LongRAG's premise: linked documents carry the other hops), so small budgets keep the strongest
    documents of several units instead of one unit's first pages. Token counts are the exact ones stored
    at ingest for the rendered block.
    """
    own = best_hit_per_member(hits)
    scored = []
    for unit_key, position, doc_id, version, part, start, end, tokens, title, acl in \
            catalog.current_members(list(units), as_of):
        if not caller.may_read(acl):
            continue  # a hit on one member never authorises the rest of its unit
        hit = own.get((unit_key, doc_id, part))
        score = hit.score if hit else units[unit_key] - config.neighbour_penalty
        scored.append((-score, unit_key, position, ContextItem(
            doc_id, version, title, "", tokens, ((start, end),), round(score, 6), unit_key, part=part)))
    scored.sort(key=lambda s: s[:3])
    return [s[3] for s in scored]


def best_hit_per_member(hits: list[Hit]) -> dict[tuple[str, str, int], Hit]:
    own: dict[tuple[str, str, int], Hit] = {}
    for h in hits:
        key = (h.unit_key, h.doc_id, h.part)
        if key not in own or h.score > own[key].score:
            own[key] = h
    return own


def _with_text(catalog: Catalog, items: list[ContextItem], hits: list[Hit]) -> list[ContextItem]:
    """Render the packed members from the catalog: header, the member's range of the text, matched sub-chunk."""
    texts = catalog.document_texts(sorted({(i.doc_id, i.doc_version) for i in items}))
    own = best_hit_per_member(hits)
    out = []
    for item in items:
        title, text = texts[(item.doc_id, item.doc_version)]
        (start, end), = item.ranges
        hit = own.get((item.unit_id, item.doc_id, item.part))
        out.append(replace(item, text=render_member(title, item.doc_id, item.doc_version, text[start:end], item.part),
                           unit_id=item.unit_id.split("@")[0], matched=text[hit.start:hit.end] if hit else None))
    return out


def shortchunk_retrieve(catalog: Catalog, index: SubchunkIndex, embed_query: Callable[[str], np.ndarray],
                        counter: TokenCounter, caller: Caller, question: str, budget: int,
                        config: LongRAGConfig = LongRAGConfig(), as_of: datetime | None = None) -> RetrievalResult:
    """The baseline: the top sub-chunks themselves, each with its document header, packed into the budget."""
    if as_of is not None:
        index = index.as_of(catalog.publish_at(as_of)[1])
    t = time.perf_counter()
    hits = search(index, embed_query(question), caller, config.overfetch)
    members = {(r[0], r[2], r[4]): r for r in catalog.current_members(sorted({h.unit_key for h in hits}), as_of)}
    visible = [(h, members[(h.unit_key, h.doc_id, h.part)]) for h in hits if (h.unit_key, h.doc_id, h.part) in members
               and caller.may_read(members[(h.unit_key, h.doc_id, h.part)][9])]
    texts = catalog.document_texts(sorted({(row[2], row[3]) for _, row in visible}))
    blocks = []
    for h, (_, _, doc_id, version, part, *_rest) in visible:
        title, text = texts[(doc_id, version)]
        chunk = text[h.start:h.end]
        blocks.append(ContextItem(doc_id, version, title, render_header(title, doc_id, version, part) + chunk + "\n",
                                  0, ((h.start, h.end),), round(h.score, 6), h.unit_key.split("@")[0], chunk, part))
    items = pack_lazily(blocks, budget, counter.count)
    return RetrievalResult("shortchunk", budget, items, {"subchunk_hits": len(hits),
                                                        "retrieve_s": round(time.perf_counter() - t, 4)})
