"""Text analysis for every method: sentences (character offsets kept), words, stop words and term folding.

English goes through blingfire's sentence splitter and a Unicode word pattern, exactly as before Chinese
support; Chinese (Simplified and Traditional, alone or mixed with English) is additionally cut after
full-width terminators (。！？；) and its runs of Han characters are segmented into words by jieba. jieba's
dictionary is Simplified, so a run is converted to Simplified characters (OpenCC, t2s) before it is segmented:
Traditional text is cut with the same dictionary, and its words meet the Simplified forms of the same words.
Only the words (matching keys) are Simplified; sentences and offsets always point into the text as written.
"""
from __future__ import annotations

import importlib.util
import logging
import re
from functools import lru_cache

import blingfire


def _bm25s_stop_words():
    """bm25s's stop-word module read on its own: importing the package pulls in scipy.sparse, about half a second
    of every cold `rag retrieve`, for two lists of words."""
    package = importlib.util.find_spec("bm25s").submodule_search_locations[0]
    spec = importlib.util.spec_from_file_location("bm25s_stopwords", f"{package}/stopwords.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_BM25S = _bm25s_stop_words()
STOPWORDS_EN, STOPWORDS_CHINESE = _BM25S.STOPWORDS_EN, _BM25S.STOPWORDS_CHINESE


@lru_cache(maxsize=1)
def _chinese():
    """jieba and OpenCC's Traditional → Simplified converter, loaded at the first Han text: importing them cost
    every English-only cold query ~55 ms of CPU and 11 MB."""
    import jieba
    import opencc

    jieba.setLogLevel(logging.WARNING)  # its dictionary-loading notes would reach every user's terminal
    return jieba, opencc.OpenCC("t2s")


_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
HAN = re.compile(f"[{_HAN}]")
_HAN_RUN = re.compile(f"[{_HAN}]+")
# Unicode letters and digits; "E-217" gives "e" and "217", "Jitao's" gives "jitao" and "s" (a stop word).
WORD = re.compile(r"[^\W_]+")
# A Chinese sentence ends after a run of full-width terminators and the closing quotes or brackets after it.
_CJK_END = re.compile(r"[。！？；]+[”’」』）》〉】〕\"')]*")
_CJK_TAIL = re.compile(r"[。！？；”’」』）》〉】〕]+")  # what blingfire may leave alone after a Chinese sentence
_LEXICAL = re.compile(r"\w+")
# Title-mention tokens: a run of word characters, except that every Han character is a token of its own,
# so a Chinese title is found inside a longer run of Chinese text (which has no spaces between words).
_MENTION = re.compile(f"[{_HAN}]|(?:(?![{_HAN}])\\w)+")

STOP_WORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing done down during each either else ever few for from
further had has have having he her here hers herself him himself his how however i if in into is it its
itself just least less many may me might more most much must my myself neither no nor not now of off on
once one only or other our ours ourselves out over own per same shall she should so some such than that
the their theirs them themselves then there these they this those though through thus to too under
until up upon us very via was we were what when where whether which while who whom whose why will with
within without would yet you your yours yourself yourselves s t d ll m re ve
named name called known located find tell give given
""".split())
# The last line: question scaffolding ("the city named X", "what is the name of") that matches everywhere.
# Chinese: bm25s's list (Simplified) plus the Traditional forms of the question words it lacks.
CHINESE_STOP_WORDS = frozenset(STOPWORDS_CHINESE) | frozenset("什麼 甚麼 哪個 哪裡 哪裏 誰 為什麼 幾 個 們 這 這個 那個 "
                                                              "與 為 於 嗎 呢 請問 是".split())
_LEXICAL_STOP = frozenset(STOPWORDS_EN) | CHINESE_STOP_WORDS


def has_han(text: str) -> bool:
    return HAN.search(text) is not None


def mostly_han(text: str) -> bool:
    """Chinese text rather than English text quoting a Chinese name: Han characters are most of its letters."""
    return 2 * len(HAN.findall(text)) > sum(ch.isalpha() for ch in text)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Non-blank sentences as [start, end) character offsets into `text`, in order."""
    if not text.strip():
        return []
    out: list[tuple[int, int]] = []
    start = 0
    for end in [m.end() for m in _CJK_END.finditer(text)] + [len(text)]:
        if end > start and text[start:end].strip():
            piece = text[start:end]
            for s, e in blingfire.text_to_sentences_and_offsets(piece)[1]:
                if out and out[-1][1] > start and _CJK_TAIL.fullmatch(piece[s:e].strip()):
                    out[-1] = (out[-1][0], start + e)
                elif piece[s:e].strip():
                    out.append((start + s, start + e))
        start = end
    return out or [(0, len(text))]


def sentences(text: str) -> list[str]:
    """The sentences' text, line breaks inside a sentence turned into spaces (as blingfire prints them)."""
    return [text[s:e].replace("\n", " ") for s, e in sentence_spans(text)]


def words(text: str, search: bool = False) -> list[str]:
    """Lower-cased words in order, stop words included; Han runs are segmented by jieba.

    `search=True` uses jieba's search mode, which adds the shorter words inside a long one
    (中华人民共和国 → 中华, 人民, 共和国, …) so that a question and a document meet on either.
    """
    out: list[str] = []
    for w in WORD.findall(text.lower()):
        if not has_han(w):
            out.append(w)
            continue
        pos = 0
        for run in _HAN_RUN.finditer(w):
            if run.start() > pos:
                out.append(w[pos:run.start()])
            out += segment(run.group(), search)
            pos = run.end()
        if pos < len(w):
            out.append(w[pos:])
    return out


def segment(han: str, search: bool = False) -> list[str]:
    """jieba's words for a run of Han characters (precise mode, or search mode), in Simplified characters."""
    han = simplified(han)
    jieba = _chinese()[0]
    return jieba.lcut_for_search(han) if search else jieba.lcut(han)


def simplified(han: str) -> str:
    """A Han run in Simplified characters, character for character (a conversion that would change the run's
    length, which OpenCC's phrase tables may do, leaves the run as written, so offsets stay valid)."""
    out = _chinese()[1].convert(han)
    return out if len(out) == len(han) else han


def is_stop(word: str) -> bool:
    return word in STOP_WORDS or word in CHINESE_STOP_WORDS


def term(word: str) -> str:
    """The key a lower-cased word is matched by: its stem in English, itself in Chinese (no inflection)."""
    return word if has_han(word) else stem(word)


def content_terms(text: str) -> list[str]:
    """Distinct terms of a text's content words, in first-seen order (search-mode segmentation)."""
    return list(dict.fromkeys(term(w) for w in words(text, search=True) if not is_stop(w)))


def lexical_tokens(text: str) -> list[str]:
    """BM25 tokens: bm25s's English rule (words of two or more characters, its stop words), jieba for Han."""
    out: list[str] = []
    for w in _LEXICAL.findall(text.lower()):
        if not has_han(w):
            if len(w) >= 2 and w not in _LEXICAL_STOP:
                out.append(w)
            continue
        for part in words(w, search=True):
            if (has_han(part) or len(part) >= 2) and part not in _LEXICAL_STOP:
                out.append(part)
    return out


# A run of capitalised words, joined by the particles inside names ("Sam Elliott", "Bank of England").
_NAME = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:(?:of|the|de|du|von|van|der|la|le|del|da)\s+)*[A-Z][\w'’-]*)*")


def names(text: str) -> list[str]:
    """Distinct capitalised names of a Latin-script text in order, a lone capitalised stop word ("The") dropped."""
    found = (m.group() for m in _NAME.finditer(text))
    return list(dict.fromkeys(n for n in found if not all(is_stop(w) for w in words(n))))


def mention_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of each title-mention token: word-character runs, and single Han characters."""
    return [m.span() for m in _MENTION.finditer(text)]


def mention_keys(text: str) -> set[str]:
    """The distinct title-mention tokens of a text: what an index of possible mentions is keyed by."""
    return {m.group() for m in _MENTION.finditer(text)}


def word_bounds(text: str) -> set[int]:
    """Character offsets where a word starts or ends (jieba's precise mode over Han, WORD elsewhere)."""
    bounds = {0, len(text)}
    for m in WORD.finditer(text):
        bounds |= {m.start(), m.end()}
        for run in _HAN_RUN.finditer(m.group()):
            at = m.start() + run.start()
            for _, s, e in _chinese()[0].tokenize(simplified(run.group())):
                bounds |= {at + s, at + e}
    return bounds


STEM_CACHE_WORDS = 1 << 16  # words of real text and questions: a corpus's working vocabulary
STEM_CACHED_CHARS = 32      # longer words are folded each time: with the count, this bounds the cache in bytes


def stem(word: str) -> str:
    """Fold plural, -ed and -ing forms of a lower-cased word onto one key ("carried", "carries" → "carry").

    No stemmer library is installed; inflection matching is part of the product, so this rule is ours:
    it only ever removes a suffix, and both the text and the terms go through it, so they meet.
    """
    return _stem_cached(word) if len(word) <= STEM_CACHED_CHARS else _stem(word)


def _stem(word: str) -> str:
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, repl in (("ies", "y"), ("ied", "y"), ("sses", "ss"), ("xes", "x"), ("ches", "ch"),
                         ("shes", "sh"), ("zes", "z")):
        if word.endswith(suffix):
            return word[: -len(suffix)] + repl
    if word.endswith("ing") and len(word) > 5:
        return _tidy(word[:-3])
    if word.endswith("ed") and len(word) > 4:
        return _tidy(word[:-2])
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return _tidy(word[:-1])
    return _tidy(word)


_stem_cached = lru_cache(maxsize=STEM_CACHE_WORDS)(_stem)


def _tidy(base: str) -> str:
    """Undouble a final consonant ("stopp" → "stop") and drop a final e ("rotate", "rotat-ed" → "rotat")."""
    if len(base) > 3 and base[-1] == base[-2] and base[-1] not in "aeiouls":
        return base[:-1]
    if len(base) > 3 and base.endswith("e"):
        return base[:-1]
    return base


MAX_QUESTION_CHARS = 2_000


class QuestionTooLong(ValueError):
    """A question longer than any real one; refused before any per-question work starts."""


def check_question(question: str) -> str:
    """Bound every per-question cost: refuse questions over MAX_QUESTION_CHARS with a one-line error."""
    if len(question) > MAX_QUESTION_CHARS:
        raise QuestionTooLong(f"the question is {len(question):,} characters long; the limit is "
                              f"{MAX_QUESTION_CHARS:,}")
    return question
