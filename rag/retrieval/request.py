"""What every retrieval method is given: the request (who asks what, within which budget, as of when) and the tools
bound once per workspace (the query embedder, the budget's token counter, optional settings overrides)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rag.models.tokens import TokenCounter
from rag.retrieval.callers import Caller


@dataclass(frozen=True)
class Request:
    """One retrieval as a caller: the question, the reader's budget and, optionally, a point in time."""

    caller: Caller
    question: str
    budget: int
    as_of: datetime | None = None
    model: object = None  # a rag.answer.llm.ChatModel (a layer above): drives ELITE's exploration; None: offline


@dataclass(frozen=True)
class Tools:
    """What a method may use besides the snapshot: the query embedder (`encode_query`, `encode_queries`, `name`),
    the one budget tokenizer, and settings that replace the defaults (the benches and tests that compare them)."""

    embedder: object
    counter: TokenCounter
    elite: object = None  # an EliteConfig overriding ELITE's defaults
    longrag: object = None  # a LongRAGConfig; None: the one tuned for the embedder (rag.retrieval.longrag.config_for)
