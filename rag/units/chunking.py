"""Sentence-aligned spans: sub-chunks for the index and parts of documents larger than a unit."""
from __future__ import annotations

from dataclasses import dataclass

from rag.models.tokens import TokenCounter
from rag.text.analysis import sentence_spans as text_sentences


@dataclass(frozen=True)
class Span:
    """A character range [start, end) of a document's text and its token count."""

    start: int
    end: int
    tokens: int


def sentence_spans(text: str, counter: TokenCounter, max_tokens: int) -> list[Span]:
    """Sentences with their token counts; a sentence longer than max_tokens is cut at token boundaries."""
    if not text.strip():
        return []
    offsets = text_sentences(text)
    counts = counter.count([text[s:e] for s, e in offsets])
    spans: list[Span] = []
    for (s, e), n in zip(offsets, counts):
        if n <= max_tokens:
            spans.append(Span(s, e, int(n)))
        else:
            spans.extend(_cut_long(text, s, e, counter, max_tokens))
    return spans


def pack(spans: list[Span], max_tokens: int, target_tokens: int | None = None) -> list[Span]:
    """Greedily join consecutive spans while the sum stays within max_tokens (closing at target_tokens)."""
    target = target_tokens or max_tokens
    packed: list[Span] = []
    start = end = tokens = 0
    open_ = False
    for sp in spans:
        if open_ and (tokens + sp.tokens > max_tokens or tokens >= target):
            packed.append(Span(start, end, tokens))
            open_ = False
        if not open_:
            start, tokens, open_ = sp.start, 0, True
        end, tokens = sp.end, tokens + sp.tokens
    if open_:
        packed.append(Span(start, end, tokens))
    return packed


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
