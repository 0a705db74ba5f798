"""ELITE: embedding-less retrieval with iterative text exploration over the caller's readable documents.

`elite_retrieve` is the entry point; `model=None` runs the deterministic offline policy. The result's
trace says which policy ran, and a counting question's answer is in `trace["direct_answer"]`.
May import `rag.answer` (the LLM behind the policy) and the layers below it.
"""
from __future__ import annotations

import time

from rag.answer.llm import ChatModel
from rag.elite.config import EliteConfig
from rag.elite.explore import Exploration, Explorer, explore
from rag.elite.importance import Encoder
from rag.elite.policy import LLMPolicy, OfflinePolicy
from rag.elite.sentences import STORES
from rag.elite.trace import format_trace
from rag.models.tokens import TokenCounter, default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.context import RetrievalResult, pack
from rag.store.catalog import Catalog

__all__ = ["EliteConfig", "Explorer", "elite_retrieve", "elite_explore", "explorer_for", "format_trace",
           "pack_exploration", "STORES"]


def elite_retrieve(catalog: Catalog, caller: Caller, question: str, budget: int,
                   explorer: Explorer | None = None) -> RetrievalResult:
    """ELITE over the documents `caller` may read now, packed into `budget` tokens (the shared contract)."""
    return pack_exploration(elite_explore(catalog, caller, question, explorer), budget)


def elite_explore(catalog: Catalog, caller: Caller, question: str, explorer: Explorer | None = None,
                  within: frozenset[str] | None = None) -> Exploration:
    """Every step but packing: budget-independent, so one exploration can be packed at several budgets."""
    return explore(catalog, caller, question, explorer or explorer_for(), within)


def explorer_for(model: ChatModel | None = None, embedder: Encoder | None = None, counter: TokenCounter | None = None,
                 config: EliteConfig = EliteConfig()) -> Explorer:
    """The LLM's policy when a model is given, else the offline one; the workspace's embedder and counter."""
    return Explorer(LLMPolicy(model) if model is not None else OfflinePolicy(), embedder or _default_embedder(),
                    counter or default_counter(), config)


def pack_exploration(found: Exploration, budget: int) -> RetrievalResult:
    """Fit the ranked candidates into the budget with `rag.retrieval.context.pack`, as LongRAG does."""
    start = time.perf_counter()
    items = pack(found.candidates, budget)
    trace = found.trace | {"packed": {"items": len(items), "tokens": sum(i.tokens for i in items), "budget": budget}}
    trace["seconds"] = found.trace["seconds"] | {"pack": round(time.perf_counter() - start, 6)}
    trace["seconds"]["total"] = round(sum(v for k, v in trace["seconds"].items() if k != "total"), 6)
    return RetrievalResult("elite", budget, items, trace)


def _default_embedder():
    from rag.models.embedders import load_embedder

    return load_embedder(threads=1)   # one thread at query time: oversubscribed threads cost 10–30×
