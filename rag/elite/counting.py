"""The counting branch: whole-word occurrences of a word's forms across the readable text, answered directly."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rag.elite.sentences import SentenceStore
from rag.elite.terms import inflections

# "How many times does the word 'cache' appear…", "how often is X mentioned", "count the occurrences of X".
_ASKS_COUNT = re.compile(r"\b(how many times|how often|number of (?:times|occurrences|mentions)|count (?:the )?"
                         r"(?:occurrences|mentions|appearances))\b", re.I)
_QUOTED = re.compile(r"[\"'“‘`]([^\"'”’`]+)[\"'”’`]")
# Unquoted, the question must point at the text itself ("the word X", "X mentioned"): "how many times did
# plague occur in Venice" asks about events, not about words.
_NAMED = re.compile(r"\b(?:word|term|phrase|name)\s+(.+?)\s+"
                    r"(?:appear|occur|show|get|is|are|was|were|come|mentioned|written|used)", re.I)
_TEXTUAL = re.compile(r"(?:times|often)\s+(?:is|are|was|were|does|do|has|have)\s+(?:the\s+)?"
                      r"(?:(?:word|term|phrase)\s+)?(.+?)\s+(?:mentioned|written|cited|used|appear)", re.I)


@dataclass(frozen=True)
class CountRequest:
    """What to count: the word or phrase as asked, and every surface form that counts as it."""

    phrase: str
    forms: tuple[str, ...]


@dataclass(frozen=True)
class Occurrence:
    doc: int
    start: int
    end: int


def detect_count(question: str) -> CountRequest | None:
    """Offline policy: a counting question quotes its word, says "the word X", or asks how often X is mentioned."""
    if not _ASKS_COUNT.search(question):
        return None
    m = _QUOTED.search(question) or _NAMED.search(question) or _TEXTUAL.search(question)
    if not m:
        return None
    phrase = m.group(1).strip(" ?.")
    return CountRequest(phrase, forms_of(phrase))


def forms_of(phrase: str, extra: list[str] | tuple[str, ...] = ()) -> tuple[str, ...]:
    """The phrase with its last word inflected (regular forms), plus any forms the LLM named."""
    head, _, last = phrase.lower().strip().rpartition(" ")
    forms = {f"{head} {f}".strip() for f in inflections(last)} if last else set()
    return tuple(sorted(forms | {f.lower().strip() for f in extra if f and f.strip()}))


def count_occurrences(store: SentenceStore, doc_mask: np.ndarray, forms: tuple[str, ...]) -> list[Occurrence]:
    """Whole-word, case-insensitive matches of any form (words of a phrase may be split by any whitespace)."""
    if not forms:
        return []
    alternatives = sorted((r"\s+".join(map(re.escape, f.split())) for f in forms), key=len, reverse=True)
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.I)
    return [Occurrence(int(d), m.start(), m.end())
            for d in np.flatnonzero(doc_mask) for m in pattern.finditer(store.texts[d])]


def direct_answer(store: SentenceStore, request: CountRequest, found: list[Occurrence]) -> dict:
    """The answer with its citations: how often, in which documents, at which character offsets."""
    by_doc: dict[int, list[Occurrence]] = {}
    for o in found:
        by_doc.setdefault(o.doc, []).append(o)
    cited = [{"doc_id": store.keys[d][0], "version": store.keys[d][1], "count": len(os),
              "offsets": [[o.start, o.end] for o in os]}
             for d, os in sorted(by_doc.items(), key=lambda kv: (-len(kv[1]), store.keys[kv[0]]))]
    return {"answer": f"'{request.phrase}' occurs {len(found)} times in {len(by_doc)} readable documents.",
            "phrase": request.phrase, "forms": list(request.forms), "count": len(found), "documents": cited}
