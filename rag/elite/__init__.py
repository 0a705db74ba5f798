"""ELITE: embedding-less retrieval with iterative text exploration over the caller's readable documents.

`elite_retrieve` is the entry point; `model=None` runs the deterministic offline policy. The result's
trace says which policy ran, and a counting question's answer is in `trace["direct_answer"]`.
May import `rag.answer` (the LLM behind the policy) and the layers below it.
"""
from __future__ import annotations

import time

from rag.answer.llm import ChatModel
from rag.elite.config import EliteConfig
from rag.elite.explore import Exploration, explore
from rag.elite.importance import Encoder
from rag.elite.policy import LLMPolicy, OfflinePolicy
from rag.elite.sentences import STORES
from rag.elite.trace import format_trace
from rag.models.tokens import TokenCounter, default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.context import RetrievalResult, pack
from rag.store.catalog import Catalog

__all__ = ["EliteConfig", "elite_retrieve", "elite_explore", "format_trace", "pack_exploration", "STORES"]


def elite_retrieve(catalog: Catalog, caller: Caller, question: str, budget: int, *, model: ChatModel | None = None,
                   embedder: Encoder | None = None, counter: TokenCounter | None = None,
                   config: EliteConfig = EliteConfig()) -> RetrievalResult:
    """ELITE over the documents `caller` may read now, packed into `budget` tokens (the shared contract)."""
    found = elite_explore(catalog, caller, question, model=model, embedder=embedder, counter=counter, config=config)
    return pack_exploration(found, budget)


def elite_explore(catalog: Catalog, caller: Caller, question: str, *, model: ChatModel | None = None,
                  embedder: Encoder | None = None, counter: TokenCounter | None = None,
                  config: EliteConfig = EliteConfig(), within: frozenset[str] | None = None) -> Exploration:
    """Every step but packing: budget-independent, so one exploration can be packed at several budgets."""
    policy = LLMPolicy(model) if model is not None else OfflinePolicy()
    return explore(catalog, caller, question, policy=policy, encoder=embedder or _default_embedder(),
                   counter=counter or default_counter(), config=config, within=within)


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

    return load_embedder(threads=1)   # one thread at query time (STACK.md: oversubscription costs 10–30×)
