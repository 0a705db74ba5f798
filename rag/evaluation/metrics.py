"""Per-question metrics: SQuAD exact match and F1, evidence recall (documents and supporting sentences)."""
from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

from rag.retrieval.context import ContextItem
from rag.text.analysis import HAN, has_han

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
# Chinese answers are compared character by character (CMRC 2018's official rule), Latin words as words.
_MIXED_TOKEN = re.compile(f"{HAN.pattern}|[^\\W_]+")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, punctuation and articles removed, whitespace collapsed."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 when the normalised prediction equals any normalised gold answer (answer or alias)."""
    predicted = _tokens(prediction)
    return float(any(predicted == _tokens(a) for a in answers))


def f1(prediction: str, answers: Iterable[str]) -> float:
    """SQuAD token F1 against the best-matching gold answer."""
    return max((_f1(_tokens(prediction), _tokens(a)) for a in answers), default=0.0)


def _tokens(text: str) -> list[str]:
    normalised = normalize_answer(text)
    return _MIXED_TOKEN.findall(normalised) if has_han(normalised) else normalised.split()


def _f1(predicted: list[str], gold: list[str]) -> float:
    if not predicted or not gold:
        return float(predicted == gold)  # SQuAD: two empty answers agree, one empty answer scores 0
    common = sum((Counter(predicted) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _squash(text: str) -> str:
    return " ".join(text.split()).lower()


def sentence_recall(items: list[ContextItem], supporting: tuple[tuple[str, str], ...]) -> float | None:
    """Share of supporting-fact sentences shown verbatim (case and whitespace aside) in their own document's
    context; None when the benchmark has no sentence-level facts for the question."""
    if not supporting:
        return None
    shown: dict[str, str] = {}
    for item in items:
        shown[item.doc_id] = shown.get(item.doc_id, "") + "\n" + _squash(item.text)
    return sum(_squash(sentence) in shown.get(doc_id, "") for doc_id, sentence in supporting) / len(supporting)
