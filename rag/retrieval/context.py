"""What a retriever hands the reader: documents with visible headers, packed into a token budget."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, NamedTuple

from rag.text.structure import structure


@dataclass(frozen=True)
class ContextItem:
    """One document (or a range of it) in the reader's context, rendered with its citable header."""

    doc_id: str
    doc_version: str
    title: str
    text: str                                  # exactly what the reader sees, header included
    tokens: int                                # of `text`, counted with rag.models.tokens (the one budget tokenizer)
    ranges: tuple[tuple[int, int], ...]        # character ranges of the document's text that `text` shows
    score: float
    unit_id: str | None = None                 # LongRAG: the long unit it came from; ELITE: None
    matched: str | None = None                 # the sub-chunk or sentence that matched the question
    part: int = 0                              # k ≥ 1 when the document was split into parts at ingest
    location: str | None = None                # the page, slide or sheet of `matched` (else of `ranges`): "p.7"

    @property
    def citation(self) -> str:
        """How an answer cites it: `doc_id p.7`, or the id alone for a document without pages."""
        return f"{self.doc_id} {self.location}" if self.location else self.doc_id


class Candidate(NamedTuple):
    """A ContextItem's fields as a tuple, for ranked lists most of whose entries are never packed: a ranking
    builds hundreds, and a frozen dataclass costs ~10x more to build. `ContextItem(*candidate)` is the item."""

    doc_id: str
    doc_version: str
    title: str
    text: str
    tokens: int
    ranges: tuple[tuple[int, int], ...]
    score: float
    unit_id: str | None = None
    matched: str | None = None
    part: int = 0


@dataclass
class RetrievalResult:
    method: str
    budget: int
    items: list[ContextItem]
    trace: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return sum(i.tokens for i in self.items)

    def context(self) -> str:
        return "\n".join(i.text for i in self.items)

    def to_json(self) -> dict:
        # An item's fields are immutable values: asdict's deep copy cost ~50 µs an item, a server's every response.
        return {"method": self.method, "budget": self.budget, "tokens": self.tokens,
                "items": [dict(vars(i)) for i in self.items], "trace": self.trace}


def located(result: RetrievalResult, texts: Callable[[list[tuple[str, str]]], dict]) -> RetrievalResult:
    """The result with each item's page, slide or sheet, for documents whose text marks them."""
    keys = sorted({(i.doc_id, i.doc_version) for i in result.items if i.ranges})
    if not keys:
        return result
    found = texts(keys)
    items = []
    for item in result.items:
        text = found.get((item.doc_id, item.doc_version), ("", ""))[1]
        if item.ranges and "<!-- location:" in text:
            item = replace(item, location=_place(item, text))
        items.append(item)
    return replace(result, items=items)


def _place(item: ContextItem, text: str) -> str | None:
    """Where the sub-chunk that matched lies, when it is known and found; else where the shown ranges lie."""
    at = text.find(item.matched, item.ranges[0][0]) if item.matched else -1
    if at >= 0:
        return structure(text).location(at, at + len(item.matched))
    return structure(text).location(item.ranges[0][0], item.ranges[-1][1])


def pack(candidates: list[ContextItem] | list[Candidate], budget: int) -> list[ContextItem] | list[Candidate]:
    """Take items in rank order; one that does not fit is skipped and the next is tried. Never exceeds budget.

    The same contract for every method, so an evaluation compares like with like.
    """
    room = _Room(budget)
    return [item for item in candidates if room.takes(item, item.tokens)]


def pack_lazily(candidates: list[ContextItem], budget: int, count, batch: int = 24) -> list[ContextItem]:
    """pack() for candidates whose tokens are not known yet: count them a batch at a time, only as far as needed;
    only the packed ones are rebuilt with their count."""
    room, packed = _Room(budget), []
    for i in range(0, len(candidates), batch):
        chunk = candidates[i : i + batch]
        packed += [replace(c, tokens=n) for c, n in zip(chunk, count([c.text for c in chunk]).tolist())
                   if room.takes(c, n)]
        if room.left < MIN_ITEM_TOKENS:
            break
    return packed


class _Room:
    """What is left of a budget, and which (document, version, ranges) it holds already."""

    def __init__(self, budget: int):
        self.left, self.seen = budget, set()

    def takes(self, item: ContextItem | Candidate, tokens: int) -> bool:
        """Take the item if it fits and is not in yet."""
        key = (item.doc_id, item.doc_version, item.ranges)
        if key in self.seen or tokens > self.left:
            return False
        self.seen.add(key)
        self.left -= tokens
        return True


MIN_ITEM_TOKENS = 16  # no header plus text is shorter, so a budget with less room left is full
