"""What a vector stands for: how a member's text is cut into sub-chunks and what text of each is embedded.

The embedded text is the sub-chunk's context, a line break, then the sub-chunk: the context is the document's title
(it names the entity a paragraph's pronouns refer to) and the headings in force (`title › section › subsection`);
a sub-chunk that starts inside a table also gets the table's header rows, so each row is read with its columns'
names. Location markers are not embedded. The stored offsets and the text packed for the reader are the document's
own.
The recipe's name is recorded in the index beside the embedder's, so a workspace whose recipe changes is
re-chunked instead of holding vectors of two recipes (rag.store.publish.switch_recipe).
"""
from __future__ import annotations

from dataclasses import dataclass

from rag.models.tokens import TokenCounter
from rag.text.structure import structure, without_markers
from rag.units.chunking import Span, pack, sentence_spans


@dataclass(frozen=True)
class SubchunkRecipe:
    """Sentence-aligned sub-chunks closing at `target_tokens` (never over `max_tokens`), consecutive ones sharing
    up to `overlap_tokens` of whole sentences."""

    target_tokens: int = 112
    max_tokens: int = 128
    overlap_tokens: int = 0

    def __post_init__(self):
        if not 0 < self.target_tokens <= self.max_tokens or not 0 <= self.overlap_tokens < self.target_tokens:
            raise ValueError(f"sub-chunk recipe {self.target_tokens}/{self.max_tokens} overlap "
                             f"{self.overlap_tokens}: need 0 < target <= max and 0 <= overlap < target")

    @property
    def name(self) -> str:
        return f"structure+title+sentences:{self.target_tokens}/{self.max_tokens}+{self.overlap_tokens}"

    def spans(self, text: str, counter: TokenCounter) -> list[Span]:
        """The sub-chunks of a text, as character ranges into it."""
        sentences = sentence_spans(text, counter, self.max_tokens)
        if not self.overlap_tokens:
            return pack(sentences, self.max_tokens, self.target_tokens)
        return windows(sentences, self.max_tokens, self.target_tokens, self.overlap_tokens)


# The name an index written before the recipe was recorded stands for (cut by sentences alone, titles embedded).
LEGACY_RECIPE_NAME = "title+sentences:112/128+0"


def embedded_text(title: str, text: str, start: int, end: int) -> str:
    """The text whose vector stands for the sub-chunk text[start:end] (and whose hash keys the vector cache)."""
    chunk = text[start:end]
    if "\n" not in text:
        return f"{title}\n{chunk}"
    found = structure(text)
    path = [h for h in found.heading_path(start) if h != title]
    context = " › ".join([title, *path])
    header = found.table_header(start)
    body = without_markers(chunk)
    return f"{context}\n{header}\n{body}" if header else f"{context}\n{body}"


def windows(spans: list[Span], max_tokens: int, target_tokens: int, overlap_tokens: int) -> list[Span]:
    """Greedy sentence windows like `pack`, each after the first starting up to `overlap_tokens` of whole
    sentences before the previous one's end (always at least one sentence further on)."""
    out: list[Span] = []
    i = 0
    while i < len(spans):
        j, tokens = i, 0
        while j < len(spans) and (j == i or (tokens + spans[j].tokens <= max_tokens and tokens < target_tokens)):
            tokens += spans[j].tokens
            j += 1
        out.append(Span(spans[i].start, spans[j - 1].end, tokens))
        if j == len(spans):
            break
        k, shared = j, 0
        while k - 1 > i and shared + spans[k - 1].tokens <= overlap_tokens:
            k -= 1
            shared += spans[k].tokens
        i = k
    return out
