"""LongRAG's ranking packed breadth first: each hop list's best member whole, then every other ranked member's
header, lead sentence and the sentences of its matched sub-chunk that share the question's or its query's terms;
then the rest of the budget grows the packed members, in rank order, toward their whole text.

Completeness counts a document present when any of its text is in the context, and LongRAG packs each member
whole (~8 MuSiQue paragraphs in 1K tokens); a header and one sentence show ~3 times as many documents. The heads
are the documents each hop was run to find, so they keep every sentence.
The small-budget method: kept for ~1K-token contexts, where it met every condition of its keep rule on the tune
half; at 2K and 4K the excerpts still fill the budget and show the answer less often than `longrag` (docs/quality.md).
Chinese (CMRC 2018, DRCD) is alike: at 1K it shows the answer paragraph more often than `longrag`, at 2K
and 4K less often on DRCD. Terms are jieba's words (rag.text.analysis), as BM25's, so Chinese questions match too.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from rag.models.tokens import TokenCounter
from rag.retrieval.context import MIN_ITEM_TOKENS, ContextItem, RetrievalResult
from rag.retrieval.dense import Hit
from rag.retrieval.longrag import Entry, Ranked
from rag.retrieval.read_state import Snapshot
from rag.text.analysis import content_terms, sentence_spans
from rag.text.bounded_cache import bytes_bounded
from rag.units.long_units import render_header, split_unit_key

BATCH = 24    # entries whose texts are read at once: a budget's excerpts stop after a few dozen of hundreds
ELISION = " … "  # between two shown ranges of one document that are not adjacent


@dataclass
class Excerpt:
    """A packed member: its sentences (document offsets) in the order they are shown first, and those shown."""

    entry: Entry
    title: str
    text: str                                  # the whole document's text
    spans: list[tuple[int, int]]               # the member's sentences, best first
    shown: list[tuple[int, int]] = field(default_factory=list)
    matched: str | None = None
    tokens: int = 0

    @property
    def whole(self) -> bool:
        return len(self.shown) == len(self.spans)

    def rendered(self, shown: list[tuple[int, int]]) -> tuple[str, tuple[tuple[int, int], ...]]:
        """The item's text and ranges showing these sentences: header, ranges in text order, ellipses between."""
        e = self.entry
        if len(shown) == len(self.spans):  # the whole member, rendered exactly as LongRAG renders it
            ranges = e.ranges
        else:
            ranges = _joined(sorted(shown), self.text)
        body = ELISION.join(self.text[s:t] for s, t in ranges)
        return render_header(self.title, e.doc_id, e.doc_version, e.part) + body + "\n", ranges

    def item(self) -> ContextItem:
        e = self.entry
        text, ranges = self.rendered(self.shown)
        return ContextItem(e.doc_id, e.doc_version, e.title, text, self.tokens, ranges, e.score,
                           split_unit_key(e.unit_id)[0], self.matched, e.part)


def pack_extracts(snap: Snapshot, ranked: Ranked, budget: int, counter: TokenCounter) -> RetrievalResult:
    """Each hop list's head whole (one that does not fit whole waits its turn as an excerpt); then each other ranked
    member's excerpt while the list and the budget last; then what is left grows the members in rank order."""
    asked = [frozenset(content_terms(q)) for q in ranked.queries] or [frozenset()]
    terms = [asked[0] | t for t in asked]  # the question's terms with the placing query's: the reader asks the first
    taken: dict[int, Excerpt | ContextItem] = {}  # by rank position
    left, seen = budget, set()
    for pos, x in _excerpts(snap, ranked, list(ranked.heads), terms, counter):
        if isinstance(x, Excerpt):
            x.shown = list(x.spans)
        left = _take(taken, seen, pos, x, left, counter)
    heads = set(taken)
    for start in range(0, len(ranked.items), BATCH):
        if left < MIN_ITEM_TOKENS:
            break
        rest = [p for p in range(start, min(start + BATCH, len(ranked.items))) if p not in heads]
        for pos, x in _excerpts(snap, ranked, rest, terms, counter, lambda: left):  # read as each entry comes
            left = _take(taken, seen, pos, x, left, counter)
    packed = [taken[p] for p in sorted(taken)]
    for excerpt in packed:
        if isinstance(excerpt, Excerpt):
            left = _grow(excerpt, left, counter)
    items = [x if isinstance(x, ContextItem) else x.item() for x in packed]
    return RetrievalResult("longrag-extract", budget, items, {**ranked.trace, "excerpts": len(items),
                                                              "heads": len(heads),
                                                              "whole": sum(_is_whole(x) for x in packed)})


def _take(taken: dict[int, Excerpt | ContextItem], seen: set, pos: int, x: Excerpt | ContextItem, left: int,
          counter: TokenCounter) -> int:
    """Pack the entry at rank `pos` as it is shown now if it fits and is not packed yet; returns what is left."""
    entry = x if isinstance(x, ContextItem) else x.entry
    key = (entry.doc_id, entry.doc_version, entry.ranges)
    n = x.tokens if isinstance(x, ContextItem) else _count(x, x.shown, counter)
    if key in seen or n > left:
        return left
    seen.add(key)
    if isinstance(x, Excerpt):
        x.tokens = n
    taken[pos] = x
    return left - n


def _excerpts(snap: Snapshot, ranked: Ranked, positions: list[int], terms: list[frozenset[str]],
              counter: TokenCounter, room: Callable[[], int] = lambda: sys.maxsize):
    """(position, excerpt) for these ranked entries (best_first's sentences), lazily; an unindexed version stays
    whole. An entry whose header alone is over `room()` is passed over unbuilt: its item is never shorter."""
    if not positions:
        return
    entries = [ranked.items[p] for p in positions]
    texts = snap.texts([(e.doc_id, e.doc_version) for e in entries])
    hits = ranked.own.get_many([(e.unit_id, e.doc_id, e.part) for e in entries])
    hops = ranked.placed_by[positions].tolist() if ranked.placed_by is not None else [0] * len(entries)
    headers = [render_header(texts[(e.doc_id, e.doc_version)][0], e.doc_id, e.doc_version, e.part)
               if e.unit_id is not None else "" for e in entries]
    # A count is the sum of the blank-separated runs' pieces, and the header ends in a newline, so the header's
    # count bounds the item's from below: once the budget is nearly full this spares building most excerpts.
    floor = counter.count_cached(headers).tolist()
    for pos, entry, hit, hop, least in zip(positions, entries, hits, hops, floor):
        if entry.unit_id is None:  # rendered whole already, its own text and tokens
            yield pos, entry
            continue
        if least > room():
            continue
        title, text = texts[(entry.doc_id, entry.doc_version)]
        spans, shown = best_first(text, entry.ranges[0], hit, terms[hop])
        yield pos, Excerpt(entry, title, text, spans, spans[:shown], text[hit.start:hit.end] if hit else None)


def best_first(text: str, member: tuple[int, int], hit: Hit | None,
               asked: frozenset[str]) -> tuple[list[tuple[int, int]], int]:
    """The member's sentences as document offsets, and how many of them its excerpt shows first: the matched
    sub-chunk's sentence sharing most of the query's terms (the earliest on a tie; the lead sentence without a hit),
    the lead sentence (what the member is about), the sub-chunk's other sentences sharing any; then the rest."""
    lo, _ = member
    found = [((s + lo, e + lo), shared) for (s, e), shared in _sentence_terms(text[member[0]:member[1]])]
    if not found:  # a blank member: shown whole, as LongRAG shows it
        return [member], 1
    overlap = [len(asked & shared) for _, shared in found]
    order = sorted(range(len(found)), key=lambda i: (-overlap[i], i))
    inside = [] if hit is None else [i for i in order if found[i][0][0] < hit.end and found[i][0][1] > hit.start]
    first = inside[0] if inside else 0
    shown = list(dict.fromkeys([first, 0] + [i for i in inside if overlap[i]]))
    return [found[i][0] for i in shown] + [found[i][0] for i in order if i not in shown], len(shown)


# A question packs a few dozen members; each entry keeps its text alive (a replaced version's too) with spans and term
# sets per sentence, as hop_queries' facts do, so its bound in bytes is what caps a long-lived server's memory.
TERMS_CACHE_BYTES = 32 << 20


@bytes_bounded(TERMS_CACHE_BYTES)
def _sentence_terms(member: str) -> tuple[tuple[tuple[int, int], frozenset[str]], ...]:
    """A member's sentences (offsets into it) with their content terms, kept for the next question that packs it."""
    return tuple(((s, e), frozenset(content_terms(member[s:e]))) for s, e in sentence_spans(member))


def _grow(excerpt: Excerpt, left: int, counter: TokenCounter) -> int:
    """Show more of the member within `left` more tokens: all of it if that fits, else each next-best sentence
    that fits; returns what is left."""
    if excerpt.whole or left <= 0:
        return left
    if excerpt.entry.tokens - excerpt.tokens <= left:
        more = excerpt.entry.tokens - excerpt.tokens
        excerpt.shown, excerpt.tokens = list(excerpt.spans), excerpt.entry.tokens
        return left - more
    for span in excerpt.spans[len(excerpt.shown):]:
        shown = excerpt.shown + [span]
        n = _count(excerpt, shown, counter)
        if n - excerpt.tokens <= left:
            left -= n - excerpt.tokens
            excerpt.shown, excerpt.tokens = shown, n
    return left


def _count(excerpt: Excerpt, shown: list[tuple[int, int]], counter: TokenCounter) -> int:
    """Tokens of the item showing these sentences (the stored count when that is the whole member)."""
    if len(shown) == len(excerpt.spans):
        return excerpt.entry.tokens
    return int(counter.count_cached([excerpt.rendered(shown)[0]])[0])


def _is_whole(x: Excerpt | ContextItem) -> bool:
    return isinstance(x, ContextItem) or x.whole


def _joined(spans: list[tuple[int, int]], text: str) -> tuple[tuple[int, int], ...]:
    """Sorted sentence spans as ranges, neighbours separated by blanks only joined into one (blanks kept)."""
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if out and not text[out[-1][1]:s].strip():
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return tuple(out)
