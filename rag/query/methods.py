"""The retrieval methods, registered once: the CLI, the server, the ask job, the evaluation and the benches share them."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable

from rag.retrieval.context import RetrievalResult
from rag.retrieval.read_state import Snapshot
from rag.retrieval.request import Request, Tools

# Longer questions are refused: every per-question cost (terms, counting, embedding) grows with the text.
MAX_QUESTION_CHARS = 2000


@dataclass(frozen=True)
class Method:
    """A retrieval method as two steps: a budget-independent ranking, then packing into one budget."""

    name: str
    summary: str
    rank: Callable[[Snapshot, Request, Tools], object]
    pack: Callable[[Snapshot, object, int, Tools], RetrievalResult]
    as_of: bool          # supports point-in-time reads
    uses_index: bool     # reads the LanceDB sub-chunk index (ELITE reads the catalog only)
    uses_lexical: bool = False    # reads the BM25 channel
    uses_sentences: bool = False  # reads ELITE's sentence store

    def run(self, snap: Snapshot, req: Request, tools: Tools) -> RetrievalResult:
        return self._packed(snap, self.rank(snap, req, tools), req.budget, tools)

    def at_budgets(self, snap: Snapshot, req: Request, tools: Tools,
                   budgets: tuple[int, ...]) -> list[tuple[RetrievalResult, float]]:
        return rank_once(lambda: self.rank(snap, req, tools), lambda found, b: self._packed(snap, found, b, tools),
                         budgets)

    def _packed(self, snap: Snapshot, found, budget: int, tools: Tools) -> RetrievalResult:
        """The packed result under this method's name (two methods may share one packing)."""
        return replace(self.pack(snap, found, budget, tools), method=self.name)


def rank_once(rank: Callable[[], object], pack: Callable[[object, int], RetrievalResult],
              budgets: tuple[int, ...]) -> list[tuple[RetrievalResult, float]]:
    """One ranking packed at every budget; each budget's seconds are the ranking's plus its own packing."""
    start = time.perf_counter()
    found = rank()
    ranking = time.perf_counter() - start
    out = []
    for budget in budgets:
        start = time.perf_counter()
        result = pack(found, budget)
        out.append((result, ranking + time.perf_counter() - start))
    return out


def _longrag(snap: Snapshot, req: Request, tools: Tools, hops: int | None = None):
    """LongRAG with the embedder's settings; `hops` overrides their hop count."""
    from rag.retrieval.longrag import configured, longrag_candidates

    config = configured(tools)
    return longrag_candidates(snap, req, tools, config if hops is None else replace(config, hops=hops))


def _pack_longrag(snap: Snapshot, ranked, budget: int, tools: Tools) -> RetrievalResult:
    from rag.retrieval.longrag import pack_ranked

    return pack_ranked(snap, ranked, budget)


def _pack_extracts(snap: Snapshot, ranked, budget: int, tools: Tools) -> RetrievalResult:
    from rag.retrieval.extracts import pack_extracts

    return pack_extracts(snap, ranked, budget, tools.counter)


def _longrag_units(snap: Snapshot, req: Request, tools: Tools):
    from rag.retrieval.longrag import configured
    from rag.retrieval.whole_units import rank_units

    return rank_units(snap, req, tools, configured(tools))


def _pack_units(snap: Snapshot, ranking, budget: int, tools: Tools) -> RetrievalResult:
    from rag.retrieval.whole_units import pack_units

    return pack_units(snap, ranking, budget)


def _shortchunk(snap: Snapshot, req: Request, tools: Tools):
    from rag.retrieval.longrag import configured
    from rag.retrieval.shortchunk import shortchunk_candidates

    return shortchunk_candidates(snap, req, tools, configured(tools))


def _pack_chunks(snap: Snapshot, chunks, budget: int, tools: Tools) -> RetrievalResult:
    from rag.retrieval.shortchunk import pack_chunks

    return pack_chunks(chunks, budget, tools.counter)


def _hybrid(snap: Snapshot, req: Request, tools: Tools):
    from rag.query.hybrid import hybrid_explore
    from rag.retrieval.longrag import configured

    # One hop: on the English tune halves ELITE's step inside LongRAG's units gained nothing from the second hop
    # (mean C@1K 0.587 with it, 0.598 without: `bench/multihop.py --half tune`, docs/quality.md).
    return hybrid_explore(snap, req, tools, replace(configured(tools), hops=1))


def _pack_hybrid(snap: Snapshot, found, budget: int, tools: Tools) -> RetrievalResult:
    from rag.query.hybrid import pack_hybrid

    return pack_hybrid(found, budget)


def _elite(snap: Snapshot, req: Request, tools: Tools):
    from rag.elite import EliteConfig, elite_explore, explorer_for

    return elite_explore(snap.catalog, req.caller, req.question, explorer_for(
        model=req.model, embedder=tools.embedder, counter=tools.counter, config=tools.elite or EliteConfig()))


def _pack_elite(snap: Snapshot, found, budget: int, tools: Tools) -> RetrievalResult:
    from rag.elite import pack_exploration

    return pack_exploration(found, budget)


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("longrag", "long units, MaxP over sub-chunks, member documents packed by score (those the question names "
           "by title first), a second hop to the names the best ones add", _longrag, _pack_longrag, True, True,
           uses_lexical=True),
    Method("longrag-extract", "the small-budget method (~1K tokens; measured on English multi-hop and Chinese "
           "benchmarks): LongRAG's ranking packed breadth first, each hop's best member whole, then each other member's "
           "header and the sentences that match its query, then the members grown toward their whole text",
           _longrag, _pack_extracts, True, True, uses_lexical=True),
    Method("longrag-1hop", "LongRAG without the second hop: a third of the latency, for single-document questions",
           partial(_longrag, hops=1), _pack_longrag, True, True, uses_lexical=True),
    Method("longrag-units", "the paper's LongRAG: whole long units in MaxP rank order, skipped when they do not fit",
           _longrag_units, _pack_units, True, True),
    Method("shortchunk", "the top sub-chunks themselves (the baseline)", _shortchunk, _pack_chunks, True, True),
    Method("elite", "embedding-less iterative exploration of the catalog", _elite, _pack_elite, False, False,
           uses_sentences=True),
    Method("hybrid", "ELITE's lexical exploration inside the documents of LongRAG's top units", _hybrid, _pack_hybrid,
           False, True, uses_lexical=True, uses_sentences=True),
)}


def method(name: str) -> Method:
    """The registered method, or a one-line error naming the choices."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; expected one of {', '.join(METHODS)}") from None
