"""The counting branch: whole-word occurrences of a word's forms across the readable text, answered directly.

Chinese has no inflection: a Chinese word counts as itself, at every occurrence whose two ends fall on word
boundaries of jieba's precise segmentation of its sentence (缓存 counts in 本地缓存 when jieba cuts 本地|缓存).
A Chinese question asks for a count with 几次 / 多少次 / 次数, and names its word in quotes (“”「」『』),
before 这个词 / 一词, or as what is mentioned (提到 / 提及); 出现 alone reads as an event, as "occur" does.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rag.elite.sentences import SentenceStore
from rag.elite.terms import inflections
from rag.text.analysis import check_question, has_han, word_bounds

# Every pattern below bounds what it captures, so detection stays linear in the question's length.
# "How many times does the word 'cache' appear…", "how often is X mentioned", "count the occurrences of X".
_ASKS_COUNT = re.compile(r"\b(how many times|how often|number of (?:times|occurrences|mentions)|count (?:the )?"
                         r"(?:occurrences|mentions|appearances))\b|(?:几|幾|多少)\s*次|次数|次數", re.I)
_QUOTED = re.compile(r"[\"'“‘`「『]([^\"'”’`」』]{1,80})[\"'”’`」』]")
# Unquoted, the question must point at the text itself ("the word X", "X mentioned"): "how many times did
# plague occur in Venice" asks about events, not about words.
_NAMED = re.compile(r"\b(?:word|term|phrase|name)\s+(.{1,80}?)\s+"
                    r"(?:appear|occur|show|get|is|are|was|were|come|mentioned|written|used)", re.I)
_TEXTUAL = re.compile(r"(?:times|often)\s+(?:is|are|was|were|does|do|has|have)\s+(?:the\s+)?"
                      r"(?:(?:word|term|phrase)\s+)?(.{1,80}?)\s+(?:mentioned|written|cited|used|appear)", re.I)
_ZH_WORD = r"([^\s，,。？?！!“”「」]{1,20}?)"
_ZH_NAMED = re.compile(_ZH_WORD + r"(?:这个词|這個詞|这个字|這個字|一词|一詞|二字)")
_ZH_MENTIONED = re.compile(_ZH_WORD + r"(?:一共|总共|總共|共)?被?(?:提到|提及|提起)了?(?:几|幾|多少)次")
_ZH_MENTIONS = re.compile(r"(?:提到|提及|提起)了?(?:几|幾|多少)次" + _ZH_WORD + r"[？?。]?$")
# Where the question says it looks ("在文档中…", "资料里…") is not part of the word.
_ZH_SCOPE = re.compile(r"^在?(?:所有|全部|这些|這些|各|本)?(?:文档|文檔|文件|资料|資料|文中|文本|手册|手冊|材料)?"
                       r"(?:里|裡|中|内|內)?")


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
    check_question(question)
    if not _ASKS_COUNT.search(question):
        return None
    for pattern in (_QUOTED, _NAMED, _TEXTUAL, _ZH_NAMED, _ZH_MENTIONS, _ZH_MENTIONED):
        m = pattern.search(question)
        phrase = _ZH_SCOPE.sub("", m.group(1).strip(" ?.？。"), count=1) if m else ""
        if phrase:
            return CountRequest(phrase, forms_of(phrase))
    return None


def forms_of(phrase: str, extra: list[str] | tuple[str, ...] = ()) -> tuple[str, ...]:
    """The phrase with its last word inflected (regular forms; Chinese has none), plus any forms the LLM named."""
    head, _, last = phrase.lower().strip().rpartition(" ")
    if has_han(last):
        forms = {phrase.lower().strip()}
    else:
        forms = {f"{head} {f}".strip() for f in inflections(last)} if last else set()
    return tuple(sorted(forms | {f.lower().strip() for f in extra if f and f.strip()}))


def count_occurrences(store: SentenceStore, doc_mask: np.ndarray, forms: tuple[str, ...]) -> list[Occurrence]:
    """Whole-word, case-insensitive matches of any form (words of a phrase may be split by any whitespace)."""
    latin = [f for f in forms if not has_han(f)]
    han = [f for f in forms if has_han(f)]
    docs = np.flatnonzero(doc_mask)
    found = [Occurrence(int(d), m.start(), m.end()) for d in docs for m in _pattern(latin, r"(?<!\w)", r"(?!\w)")
             .finditer(store.texts[d])] if latin else []
    if han:
        pattern = _pattern(han, "", "")
        found += [o for d in docs for o in _whole_words(store, int(d), pattern)]
    return sorted(found, key=lambda o: (o.doc, o.start))


def _pattern(forms: list[str], before: str, after: str) -> re.Pattern:
    alternatives = sorted((r"\s+".join(map(re.escape, f.split())) for f in forms), key=len, reverse=True)
    return re.compile(before + "(?:" + "|".join(alternatives) + ")" + after, re.I)


def _whole_words(store: SentenceStore, doc: int, pattern: re.Pattern) -> list[Occurrence]:
    """Matches whose ends are word boundaries of their sentence's segmentation (only matched sentences are cut)."""
    text, lo, hi = store.texts[doc], store.doc_ptr[doc], store.doc_ptr[doc + 1]
    starts, ends = store.starts[lo:hi], store.ends[lo:hi]
    out = []
    for m in pattern.finditer(text):
        first = max(0, int(np.searchsorted(starts, m.start(), side="right")) - 1)
        last = max(first, int(np.searchsorted(starts, m.end() - 1, side="right")) - 1)
        a, b = (int(starts[first]), int(ends[last])) if len(starts) else (0, len(text))
        bounds = word_bounds(text[a:b])
        if m.start() - a in bounds and m.end() - a in bounds:
            out.append(Occurrence(doc, m.start(), m.end()))
    return out


def direct_answer(store: SentenceStore, request: CountRequest, found: list[Occurrence]) -> dict:
    """The answer with its citations: how often, in which documents, at which character offsets."""
    by_doc: dict[int, list[Occurrence]] = {}
    for o in found:
        by_doc.setdefault(o.doc, []).append(o)
    cited = [{"doc_id": store.keys[d][0], "version": store.keys[d][1], "count": len(os),
              "offsets": [[o.start, o.end] for o in os]}
             for d, os in sorted(by_doc.items(), key=lambda kv: (-len(kv[1]), store.keys[kv[0]]))]
    answer = (f"“{request.phrase}”在 {len(by_doc)} 份可读文档中出现 {len(found)} 次。" if has_han(request.phrase) else
              f"'{request.phrase}' occurs {len(found)} times in {len(by_doc)} readable documents.")
    return {"answer": answer,
            "phrase": request.phrase, "forms": list(request.forms), "count": len(found), "documents": cited}
