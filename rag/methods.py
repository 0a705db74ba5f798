"""The retrieval methods, registered once: the CLI, the server, the ask job, the evaluation and the benches share them."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from rag.access import Caller
from rag.context import RetrievalResult
from rag.llm import ChatModel
from rag.snapshot import Snapshot
from rag.tokens import TokenCounter

# Longer questions are refused: every per-question cost (terms, counting, embedding) grows with the text.
MAX_QUESTION_CHARS = 2000


@dataclass(frozen=True)
class Request:
    """One retrieval as a caller: the question, the reader's budget and, optionally, a point in time."""

    caller: Caller
    question: str
    budget: int
    as_of: datetime | None = None
    model: ChatModel | None = None       # drives ELITE's exploration when given; the offline policy otherwise


@dataclass(frozen=True)
class Tools:
    """What a method may use besides the snapshot: the query embedder and the one budget tokenizer."""

    embedder: object
    counter: TokenCounter


@dataclass(frozen=True)
class Method:
    name: str
    summary: str
    run: Callable[[Snapshot, Request, Tools], RetrievalResult]
    as_of: bool          # supports point-in-time reads
    uses_index: bool     # reads the LanceDB sub-chunk index (ELITE reads the catalog only)


def _longrag(snap: Snapshot, req: Request, tools: Tools) -> RetrievalResult:
    from rag.longrag import config_for, longrag_retrieve

    return longrag_retrieve(snap, tools.embedder.encode_query, tools.counter, req.caller, req.question, req.budget,
                            config_for(tools.embedder.name), as_of=req.as_of)


def _longrag_units(snap: Snapshot, req: Request, tools: Tools) -> RetrievalResult:
    from rag.longrag_units import longrag_units_retrieve

    return longrag_units_retrieve(snap, tools.embedder.encode_query, tools.counter, req.caller, req.question,
                                  req.budget, as_of=req.as_of)


def _shortchunk(snap: Snapshot, req: Request, tools: Tools) -> RetrievalResult:
    from rag.longrag import shortchunk_retrieve

    return shortchunk_retrieve(snap, tools.embedder.encode_query, tools.counter, req.caller, req.question,
                               req.budget, as_of=req.as_of)


def _hybrid(snap: Snapshot, req: Request, tools: Tools) -> RetrievalResult:
    from rag.hybrid import hybrid_retrieve
    from rag.longrag import config_for

    return hybrid_retrieve(snap, tools.embedder, tools.counter, req.caller, req.question, req.budget,
                           config_for(tools.embedder.name))


def _elite(snap: Snapshot, req: Request, tools: Tools) -> RetrievalResult:
    from rag.elite import elite_retrieve

    return elite_retrieve(snap.catalog, req.caller, req.question, req.budget, model=req.model,
                          embedder=tools.embedder, counter=tools.counter)


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("longrag", "long units, MaxP over sub-chunks, member documents packed by score", _longrag, True, True),
    Method("longrag-units", "the paper's LongRAG: whole long units in MaxP rank order, skipped when they do not fit",
           _longrag_units, True, True),
    Method("shortchunk", "the top sub-chunks themselves (the baseline)", _shortchunk, True, True),
    Method("elite", "embedding-less iterative exploration of the catalog", _elite, False, False),
    Method("hybrid", "ELITE's lexical exploration inside the documents of LongRAG's top units", _hybrid, False, True),
)}


def method(name: str) -> Method:
    """The registered method, or a one-line error naming the choices."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; expected one of {', '.join(METHODS)}") from None
