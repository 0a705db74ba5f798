"""Words as ELITE matches them: lower-cased, stop words dropped, inflections folded by a small suffix rule."""
from __future__ import annotations

import re
from functools import lru_cache

# Unicode letters and digits; "E-217" gives "e" and "217", "Jitao's" gives "jitao" and "s" (a stop word).
WORD = re.compile(r"[^\W_]+")

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


@lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    """Fold plural, -ed and -ing forms of a lower-cased word onto one key ("carried", "carries" → "carry").

    No stemmer library is installed; inflection matching is part of the product, so this rule is ours:
    it only ever removes a suffix, and both the text and the terms go through it, so they meet.
    """
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


def _tidy(base: str) -> str:
    """Undouble a final consonant ("stopp" → "stop") and drop a final e ("rotate", "rotat-ed" → "rotat")."""
    if len(base) > 3 and base[-1] == base[-2] and base[-1] not in "aeiouls":
        return base[:-1]
    if len(base) > 3 and base.endswith("e"):
        return base[:-1]
    return base


def words(text: str) -> list[str]:
    """The lower-cased words of a text, in order, stop words included (for counting and phrases)."""
    return WORD.findall(text.lower())


def content_terms(text: str) -> list[str]:
    """Distinct stems of a text's content words, in first-seen order."""
    return list(dict.fromkeys(stem(w) for w in words(text) if w not in STOP_WORDS))


def inflections(word: str) -> list[str]:
    """Regular surface forms of a word (plural, -ed, -ing); the LLM policy may add irregular ones."""
    w = word.lower()
    base = w[:-1] if w.endswith("e") else w
    plural = w + "es" if w.endswith(("s", "x", "z", "ch", "sh")) else w + "s"
    forms = {w, plural, base + "ed", base + "ing"}
    if w.endswith("y") and len(w) > 2 and w[-2] not in "aeiou":
        forms |= {w[:-1] + "ies", w[:-1] + "ied"}
    if len(w) >= 3 and w[-1] not in "aeiouwxy" and w[-2] in "aeiou" and w[-3] not in "aeiou":
        forms |= {w + w[-1] + "ed", w + w[-1] + "ing"}  # stop → stopped, stopping
    return sorted(forms)
