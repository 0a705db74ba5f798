"""The short-chunk baseline: the top sub-chunks themselves, each with its document header, in score order."""
from __future__ import annotations

import time
from dataclasses import dataclass

from rag.models.tokens import TokenCounter
from rag.retrieval.context import ContextItem, RetrievalResult, pack_lazily
from rag.retrieval.dense import Hit, nearest
from rag.retrieval.longrag import LongRAGConfig
from rag.retrieval.read_state import Snapshot
from rag.retrieval.request import Request, Tools
from rag.store.rows import MemberRow
from rag.units.long_units import render_header, split_unit_key


class Blocks:
    """The baseline's visible sub-chunks as blocks, rendered as packing reads them: a budget packs the first few of
    ~200, so the rest are never rendered."""

    def __init__(self, snap: Snapshot, visible: list[tuple[Hit, MemberRow]]):
        self._snap, self._visible, self._done = snap, visible, []

    def __len__(self) -> int:
        return len(self._visible)

    def __getitem__(self, at: slice) -> list[ContextItem]:
        upto = min(at.stop, len(self._visible))
        if len(self._done) < upto:
            todo = self._visible[len(self._done) : upto]
            texts = self._snap.texts([m for _, m in todo])
            self._done += [_block(h, m, *texts[(m.doc_id, m.doc_version)]) for h, m in todo]
        return self._done[at]


def _block(h: Hit, m: MemberRow, title: str, text: str) -> ContextItem:
    chunk = text[h.start:h.end]
    return ContextItem(m.doc_id, m.doc_version, title, render_header(title, m.doc_id, m.doc_version, m.part) + chunk
                       + "\n", 0, ((h.start, h.end),), round(h.score, 6), split_unit_key(h.unit_key)[0], chunk, m.part)


@dataclass
class Chunks:
    """The baseline's readable sub-chunks in score order; budget-independent."""

    items: Blocks
    hits: int
    seconds: float


def shortchunk_candidates(snap: Snapshot, req: Request, tools: Tools, config: LongRAGConfig) -> Chunks:
    """The baseline: the top sub-chunks themselves, each with its document header, in score order."""
    t = time.perf_counter()
    caller, as_of = req.caller, req.as_of
    hits, _ = nearest(snap, tools.embedder.encode_query(req.question), caller, config.overfetch, as_of)
    members = {(m.unit_key, m.doc_id, m.part): m for m in snap.members([h.unit_key for h in hits], as_of)}
    visible = [(h, members[(h.unit_key, h.doc_id, h.part)]) for h in hits if (h.unit_key, h.doc_id, h.part) in members
               and caller.may_read(members[(h.unit_key, h.doc_id, h.part)].acl)]
    return Chunks(Blocks(snap, visible), len(hits), time.perf_counter() - t)


def pack_chunks(chunks: Chunks, budget: int, counter: TokenCounter) -> RetrievalResult:
    t = time.perf_counter()
    items = pack_lazily(chunks.items, budget, counter.count_cached)
    return RetrievalResult("shortchunk", budget, items, {
        "subchunk_hits": chunks.hits, "retrieve_s": round(chunks.seconds + time.perf_counter() - t, 4)})
