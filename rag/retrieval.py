"""One entry point for every retrieval method, so the CLI, the ask job and the benches call them alike."""
from __future__ import annotations

from datetime import datetime

from rag.access import Caller
from rag.catalog import Catalog
from rag.context import RetrievalResult
from rag.elite import EliteConfig, elite_retrieve
from rag.index import SubchunkIndex
from rag.llm import ChatModel
from rag.longrag import longrag_retrieve, shortchunk_retrieve
from rag.tokens import TokenCounter

METHODS = ("longrag", "shortchunk", "elite")


def retrieve(method: str, catalog: Catalog, index: SubchunkIndex, caller: Caller, question: str, budget: int, *,
             embedder, counter: TokenCounter, model: ChatModel | None = None, as_of: datetime | None = None,
             elite_config: EliteConfig = EliteConfig()) -> RetrievalResult:
    """Context for the question as the caller, within the budget; ELITE reads the catalog only."""
    if method == "elite":
        if as_of is not None:
            raise ValueError("as-of reads are supported for longrag and shortchunk")
        return elite_retrieve(catalog, caller, question, budget, model=model, embedder=embedder, counter=counter,
                              config=elite_config)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    fn = longrag_retrieve if method == "longrag" else shortchunk_retrieve
    return fn(catalog, index, embedder.encode_query, counter, caller, question, budget, as_of=as_of)
