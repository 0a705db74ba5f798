"""Sentence-aligned spans: sub-chunks for the index and parts of documents larger than a unit.

A Markdown text's structure bounds its spans (rag.text.structure): a heading, a table row and a location marker are
each a span of their own, so no span starts or ends inside one; prose and list items are cut into sentences.
"""
from __future__ import annotations

from dataclasses import dataclass

from rag.models.tokens import TokenCounter
from rag.text.analysis import sentence_spans as text_sentences
from rag.text.structure import blocks

# Spans that open what follows them: a chunk never closes on one while text follows, and one closes the chunk
# before it once that holds this share of the target (a section or page then starts a sub-chunk of its own).
OPENERS = {"heading": 0.5, "marker": 0.25}


@dataclass(frozen=True)
class Span:
    """A character range [start, end) of a document's text and its token count."""

    start: int
    end: int
    tokens: int
    kind: str = "prose"


def sentence_spans(text: str, counter: TokenCounter, max_tokens: int) -> list[Span]:
    """Sentences and structural lines with their token counts; one longer than max_tokens is cut at token
    boundaries (a table row only when the row alone is longer)."""
    if not text.strip():
        return []
    offsets = _pieces(text)
    counts = counter.count([text[s:e] for s, e, _ in offsets])
    spans: list[Span] = []
    for (s, e, kind), n in zip(offsets, counts):
        if n <= max_tokens:
            spans.append(Span(s, e, int(n), kind))
        elif kind != "prose" and "\n" in text[s:e]:
            spans.extend(_lines(text, s, e, kind, counter, max_tokens))
        else:
            spans.extend(_cut_long(text, s, e, counter, max_tokens))
    return spans


def _lines(text: str, start: int, end: int, kind: str, counter: TokenCounter, max_tokens: int) -> list[Span]:
    """A block of several lines longer than max_tokens (a table's header with its rule) split between its lines; a
    line is cut only when it alone is longer."""
    starts = [start] + [start + i + 1 for i, ch in enumerate(text[start:end]) if ch == "\n"]
    bounds = list(zip(starts, [at - 1 for at in starts[1:]] + [end]))
    out: list[Span] = []
    for (s, e), n in zip(bounds, counter.count([text[s:e] for s, e in bounds])):
        out += [Span(s, e, int(n), kind)] if n <= max_tokens else _cut_long(text, s, e, counter, max_tokens)
    return out


def _pieces(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each sentence of prose and list items, and of each other block whole."""
    if "\n" not in text.strip():
        return [(s, e, "prose") for s, e in text_sentences(text)]
    out = []
    for b in blocks(text):
        if b.kind in ("prose", "item"):
            out += [(b.start + s, b.start + e, b.kind) for s, e in text_sentences(text[b.start:b.end])]
        else:
            out.append((b.start, b.end, b.kind))
    return out or [(s, e, "prose") for s, e in text_sentences(text)]


def pack(spans: list[Span], max_tokens: int, target_tokens: int | None = None) -> list[Span]:
    """Greedily join consecutive spans while the sum stays within max_tokens (closing at target_tokens)."""
    target = target_tokens or max_tokens
    packed: list[Span] = []
    chunk: list[Span] = []
    tokens = 0
    for sp in spans:
        if chunk and (tokens + sp.tokens > max_tokens or tokens >= target
                      or (sp.kind in OPENERS and tokens >= OPENERS[sp.kind] * target)):
            carried = _trailing_openers(chunk)
            packed.append(_joined(chunk[:len(chunk) - len(carried)]))
            chunk, tokens = carried, sum(c.tokens for c in carried)
            if chunk and tokens + sp.tokens > max_tokens:
                packed.append(_joined(chunk))
                chunk, tokens = [], 0
        chunk.append(sp)
        tokens += sp.tokens
    if chunk:
        packed.append(_joined(chunk))
    return packed


def _trailing_openers(chunk: list[Span]) -> list[Span]:
    """The headings and markers a chunk ends with, when it holds something before them: they open the next."""
    n = len(chunk)
    while n > 0 and chunk[n - 1].kind in OPENERS:
        n -= 1
    return chunk[n:] if n > 0 else []


def _joined(chunk: list[Span]) -> Span:
    return Span(chunk[0].start, chunk[-1].end, sum(c.tokens for c in chunk))


def subchunks(text: str, counter: TokenCounter, target_tokens: int = 112, max_tokens: int = 128) -> list[Span]:
    return pack(sentence_spans(text, counter, max_tokens), max_tokens, target_tokens)


def _cut_long(text: str, start: int, end: int, counter: TokenCounter, max_tokens: int) -> list[Span]:
    """Cut a sentence longer than max_tokens between words (inside a word only if one word alone is longer)."""
    offsets, words = counter.pieces(text[start:end])
    word_starts = [i for i in range(1, len(words)) if words[i] != words[i - 1]] + [len(words)]
    out, i = [], 0
    while i < len(offsets):
        j = max((b for b in word_starts if i < b <= i + max_tokens), default=min(i + max_tokens, len(offsets)))
        s = start + offsets[i][0]
        e = start + offsets[j][0] if j < len(offsets) else end
        out.append(Span(s, e, j - i))
        i = j
    return out
