"""What every retrieval method is given: the request (who asks what, within which budget, as of when) and the tools
bound once per workspace (the query embedder, the budget's token counter, optional settings overrides)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from rag.models.tokens import TokenCounter
from rag.retrieval.callers import Caller

if TYPE_CHECKING:
    from rag.answer.llm import ChatModel
    from rag.retrieval.longrag import LongRAGConfig


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
    """What a method may use besides the snapshot: the query embedder (`encode_query`, `encode_queries`, `name`),
    the one budget tokenizer, and settings that replace the defaults (the benches and tests that compare them)."""

    embedder: object
    counter: TokenCounter
    elite: object = None  # an EliteConfig overriding ELITE's defaults
    longrag: LongRAGConfig | None = None  # None: the embedder's tuned configuration (rag.retrieval.longrag.config_for)
