"""Readers: LongRAG's two-step LLM reader (long answer with citations, then a short answer) and an extractive one.

Citation rule (`check_citations`): a citation is the text inside square brackets, split at "," or ";", with any
" · version …" suffix dropped, so `[a]`, `[a, b]` and a copied header `[a · version 2026]` all cite `a`; a place
after the id (`[a p.7]`, `[a slide 3]`, `[a sheet Budget]`) cites `a` when `a p.7` is not itself a document.
A citation is *locatable* when the sentence carrying it (the previous sentence when the brackets stand alone)
can be found in the cited document's context text (for `[a; b]`, in a's and b's together): every quoted span
("…" or “…”) appears there verbatim (case and whitespace ignored), or, when nothing is quoted, at least half of
the sentence's content words do. A citation of a document outside the context is never locatable.
"""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass

import numpy as np

from rag.answer.llm import ChatModel
from rag.retrieval.context import ContextItem, RetrievalResult
from rag.text.analysis import has_han, is_stop, sentences, words

LONG_ANSWER_TOKENS = 200
SHORT_ANSWER_TOKENS = 24
LOCATABLE_SHARE = 0.5

LONG_PROMPT = ("Answer the question from the documents in one or two sentences. After each fact, cite the id of "
               "its document in square brackets.")
SHORT_PROMPT = ("Give the short answer to the question: a few words (a name, number, date or phrase) copied from "
                "the long answer. Reply with the short answer only.")
# One worked example per step: without it the 0.5B local model copies the instruction's placeholder id.
LONG_EXAMPLE = [
    {"role": "user", "content": "Documents:\n## Brewing guide\n[brew-guide · version 3]\nBrew coffee at 93 degrees "
                                "for four minutes.\n## Tea notes\n[tea-notes · version 1]\nGreen tea needs 80 degrees."
                                "\n\nQuestion: How hot should coffee be brewed?"},
    {"role": "assistant", "content": "Coffee should be brewed at 93 degrees [brew-guide]."},
]
SHORT_EXAMPLE = [
    {"role": "user", "content": "Question: How hot should coffee be brewed?\n"
                                "Long answer: Coffee should be brewed at 93 degrees.\nShort answer:"},
    {"role": "assistant", "content": "93 degrees"},
]

_STOPWORDS = frozenset(
    "the and for are was were with that this from has have had not but its into onto our their there these those "
    "they them then than what which who whom whose when where why how all any can does did doing been being his "
    "her she him you your yours about above after before over under again further once only own same such very "
    "will would should could may might must also each other some more most both few nor out off per via".split()
)
_BRACKETS = re.compile(r"\[([^\[\]\n]+)\]")
_QUOTES = re.compile(r'"([^"\n]+)"|“([^”\n]+)”')
_WORDS = re.compile(r"[a-z0-9]+")
_HEADER_LINE = re.compile(r"^(## .*|\[[^\]\n]*\])$")
_PLACE = re.compile(r"\s+(?:p\.\s*\d+|pp?\.\s*\d+\s*[–-]\s*\d+|slides?\s+\d+(?:\s*[–-]\s*\d+)?|sheet\s+.+)$",
                    re.IGNORECASE)


@dataclass(frozen=True)
class Answer:
    """What a reader says, which documents it cites, whether those check out, and what it cost."""

    long_answer: str
    short_answer: str
    citations: list[str]        # cited doc ids, in order of first citation
    citations_valid: bool       # at least one citation, and every cited id is in the context
    citation_locatable: float   # share of citation occurrences whose sentence is found in the cited document
    reader: str                 # "local:<model>", "endpoint:<model>" or "extractive"
    llm_calls: int
    input_tokens: int
    output_tokens: int
    seconds: float

    def to_json(self) -> dict:
        return asdict(self)


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning: numbers, words of three or more letters that are not stopwords, and
    Chinese words (rag.text.analysis's segmentation) that are not stop words."""
    if has_han(text):
        return [w for w in words(text) if (has_han(w) and not is_stop(w)) or w.isdigit()
                or (len(w) >= 3 and w not in _STOPWORDS)]
    return [w for w in _WORDS.findall(text.lower()) if w.isdigit() or (len(w) >= 3 and w not in _STOPWORDS)]


def cited_ids(bracket: str) -> list[str]:
    """The document ids inside one pair of brackets (without the brackets)."""
    ids = (part.split("·")[0].strip() for part in re.split(r"[,;]", bracket))
    return [i for i in ids if i and not re.match(r"(version|part)\b", i)]


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def _locatable(claim: str, doc_text: str) -> bool:
    quotes = [a or b for a, b in _QUOTES.findall(claim)]
    if quotes:
        return all(_normalise(q) in _normalise(doc_text) for q in quotes)
    words = content_words(claim)
    doc_words = set(content_words(doc_text))
    return bool(words) and sum(w in doc_words for w in words) >= LOCATABLE_SHARE * len(words)


def check_citations(answer_text: str, items: list[ContextItem]) -> tuple[list[str], bool, float]:
    """(cited ids in first-cited order, all valid, share of citation occurrences locatable); see the module doc."""
    docs: dict[str, str] = {}
    for item in items:
        docs[item.doc_id] = docs.get(item.doc_id, "") + item.text + "\n"
    citations: list[str] = []
    occurrences = located = 0
    previous = ""
    for sentence in sentences(answer_text):
        claim = _BRACKETS.sub(" ", sentence)
        if not content_words(claim):  # brackets standing alone after the sentence they support
            claim = previous
        for bracket in _BRACKETS.findall(sentence):
            ids = [i if i in docs else _PLACE.sub("", i) for i in cited_ids(bracket)]
            together = "\n".join(docs[i] for i in ids if i in docs)  # one bracket's documents support it jointly
            for doc_id in ids:
                if doc_id not in citations:
                    citations.append(doc_id)
                occurrences += 1
                located += doc_id in docs and _locatable(claim, together)
        previous = claim
    valid = bool(citations) and all(c in docs for c in citations)
    return citations, valid, located / occurrences if occurrences else 0.0


def strip_citations(text: str) -> str:
    return " ".join(_BRACKETS.sub(" ", text).split())


def _clean_short(text: str) -> str:
    """The model's short answer: first non-empty line, without a label, citations, quotes or a final period."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"^\s*short answer\s*:\s*", "", line, flags=re.IGNORECASE)
    return strip_citations(line).strip(" \"'“”`").rstrip(".").strip()


def answer(question: str, result: RetrievalResult, model: ChatModel | None, embedder=None) -> Answer:
    """Answer from the retrieved context: two LLM calls with `model`, or the extractive reader when it is None."""
    start = time.perf_counter()
    if model is None:
        long_answer, short_answer, calls, tokens_in, tokens_out = _extract(question, result.items, embedder)
        reader = "extractive"
    else:
        long_answer, short_answer, calls, tokens_in, tokens_out = _two_step(question, result, model)
        reader = f"{getattr(model, 'kind', 'endpoint')}:{model.name}"
    citations, valid, locatable = check_citations(long_answer, result.items)
    return Answer(long_answer=long_answer, short_answer=short_answer, citations=citations, citations_valid=valid,
                  citation_locatable=locatable, reader=reader, llm_calls=calls, input_tokens=tokens_in,
                  output_tokens=tokens_out, seconds=time.perf_counter() - start)


def _two_step(question: str, result: RetrievalResult, model: ChatModel) -> tuple[str, str, int, int, int]:
    """LongRAG's reader: a cited long answer from the whole context, then a short answer taken from it."""
    long = model.complete([{"role": "system", "content": LONG_PROMPT}, *LONG_EXAMPLE,
                           {"role": "user", "content": f"Documents:\n{result.context()}\n\nQuestion: {question}"}],
                          max_tokens=LONG_ANSWER_TOKENS)
    long_answer = long.text.strip()
    short = model.complete([{"role": "system", "content": SHORT_PROMPT}, *SHORT_EXAMPLE,
                            {"role": "user", "content": f"Question: {question}\nLong answer: "
                                                        f"{strip_citations(long_answer)}\nShort answer:"}],
                           max_tokens=SHORT_ANSWER_TOKENS)
    return (long_answer, _clean_short(short.text), 2, long.input_tokens + short.input_tokens,
            long.output_tokens + short.output_tokens)


def context_sentences(items: list[ContextItem]) -> list[tuple[str, str]]:
    """(doc_id, sentence) for every sentence of the context in order, document headers left out."""
    out = []
    for item in items:
        body = "\n".join(ln for ln in item.text.splitlines() if not _HEADER_LINE.match(ln.strip()))
        out.extend((item.doc_id, s.strip()) for s in sentences(body) if s.strip())
    return out


def short_span(sentence: str, question: str) -> str:
    """The sentence trimmed: words that occur in the question are dropped from both ends, then edge punctuation;
    the whole sentence when every word is in the question."""
    asked = set(_WORDS.findall(question.lower()))
    words = sentence.split()
    keep = ["".join(_WORDS.findall(w.lower())) not in asked for w in words]
    if any(keep):
        words = words[keep.index(True): len(keep) - keep[::-1].index(True)]
    return " ".join(words).strip(" ,;:.!?\"'()“”")


def _extract(question: str, items: list[ContextItem], embedder) -> tuple[str, str, int, int, int]:
    """The context sentence most similar to the question (cosine with `embedder`, else content-word overlap),
    cited; ties go to the earliest sentence, i.e. the best-ranked document."""
    sentences = context_sentences(items)
    if not sentences:
        return "", "", 0, 0, 0
    texts = [s for _, s in sentences]
    if embedder is not None:
        vectors = embedder.encode([question, *texts])
        scores = vectors[1:] @ vectors[0]
    else:
        asked = set(content_words(question))
        scores = np.array([len(asked & set(content_words(t))) for t in texts], dtype=float)
    doc_id, sentence = sentences[int(np.argmax(scores))]
    return f"{sentence} [{doc_id}]", short_span(sentence, question), 0, 0, 0
