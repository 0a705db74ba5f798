"""Readers: LongRAG's two-step LLM reader (long answer with citations, then a short answer) and an extractive one.

The LLM reader sees the context as numbered sources and cites `[1]` (rag.answer.sources); where the chat model
constrains output to a JSON schema (`schema_output`), the long answer is statements with source numbers. Every
answer's citations then go through rag.answer.citations: unusable ones are dropped, uncited statements and an
unsupported short answer are attributed to the context sentence they are found in, or left plainly uncited. A
reply that nothing in the context supports (no statement located, the short answer found nowhere) is withheld: the
answer says the sources do not answer the question, and keeps the reader's words only as `withheld`.
"""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass

import numpy as np

from rag.answer.citations import (
    SHORT_UNSUPPORTED,
    Citation,
    check_citations,
    cite,
    content_words,
    item_sentences,
    strip_citations,
)
from rag.answer.llm import ChatModel
from rag.answer.sources import (
    answer_schema,
    numbered_context,
    render_statements,
    resolve_numbers,
    statements_of,
)
from rag.retrieval.context import ContextItem, RetrievalResult

LONG_ANSWER_TOKENS = 200
STRUCTURED_ANSWER_TOKENS = 256  # the JSON keys and brackets cost about 20 tokens a statement
SHORT_ANSWER_TOKENS = 24

LONG_PROMPT = ("Answer the question from the numbered sources in one or two sentences. After each fact, cite the "
               "number of its source in square brackets, like [1].")
STRUCTURED_PROMPT = ("Answer the question from the numbered sources in one or two statements. Give each statement "
                     "with the numbers of the sources it comes from, as JSON.")
SHORT_PROMPT = ("Give the short answer to the question: a few words (a name, number, date or phrase) copied from "
                "the long answer. Reply with the short answer only.")
# One worked example per step: without it the 0.5B local model copies the instruction's placeholder.
_EXAMPLE_QUESTION = {"role": "user", "content": "Sources:\n[1] Brewing guide · brew-guide · version 3\nBrew coffee "
                                                "at 93 degrees for four minutes.\n\n[2] Tea notes · tea-notes · "
                                                "version 1\nGreen tea needs 80 degrees.\n\nQuestion: How hot "
                                                "should coffee be brewed?"}
LONG_EXAMPLE = [_EXAMPLE_QUESTION, {"role": "assistant", "content": "Coffee should be brewed at 93 degrees [1]."}]
STRUCTURED_EXAMPLE = [_EXAMPLE_QUESTION, {"role": "assistant", "content": '{"statements": [{"statement": "Coffee '
                                                                         'should be brewed at 93 degrees.", '
                                                                         '"sources": [1]}]}'}]
SHORT_EXAMPLE = [
    {"role": "user", "content": "Question: How hot should coffee be brewed?\n"
                                "Long answer: Coffee should be brewed at 93 degrees.\nShort answer:"},
    {"role": "assistant", "content": "93 degrees"},
]
_WORDS = re.compile(r"[a-z0-9]+")
NOT_IN_SOURCES = "The sources you may read do not answer this question."


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
    sources: tuple[Citation, ...] = ()  # each citation: version, place, model-given or attributed, for what
    dropped: tuple[str, ...] = ()       # the reader's citations left out: not in the context, or not found there
    uncited: int = 0                    # statements of the long answer with no citation
    short_answer_check: str = ""        # "in cited text", "attributed" or "not found" (flagged)
    withheld: str = ""                  # a reply nothing in the context supports, kept from the answer
    replies: tuple[str, ...] = ()       # the model's outputs as written (long answer, short answer), unchecked

    @property
    def abstained(self) -> bool:
        return bool(self.withheld)

    @property
    def attributed(self) -> int:
        return sum(c.origin == "attributed" for c in self.sources)

    def to_json(self) -> dict:
        return asdict(self) | {"abstained": self.abstained}


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
        reader, replies = "extractive", ()
    else:
        long_answer, short_answer, calls, tokens_in, tokens_out, replies = _two_step(question, result, model)
        reader = f"{getattr(model, 'kind', 'endpoint')}:{model.name}"
    cited = cite(long_answer, short_answer, result.items, question)
    if not cited.citations and cited.short_answer_check == SHORT_UNSUPPORTED and (long_answer or short_answer):
        return Answer(NOT_IN_SOURCES, "", [], False, 0.0, reader, calls, tokens_in, tokens_out,
                      time.perf_counter() - start, dropped=cited.dropped, uncited=cited.uncited,
                      short_answer_check=SHORT_UNSUPPORTED, withheld=_withheld(long_answer, short_answer),
                      replies=replies)
    citations, _, locatable = check_citations(cited.text, result.items)
    if not citations and cited.citations:
        locatable = 1.0  # only the short answer is cited, and it is found in the cited sentence by construction
    citations += [c.doc_id for c in cited.citations if c.doc_id not in citations]  # the short answer's, if any
    valid = bool(citations) and set(citations) <= {i.doc_id for i in result.items}
    return Answer(long_answer=cited.text, short_answer=short_answer, citations=citations,
                  citations_valid=valid, citation_locatable=locatable, reader=reader,
                  llm_calls=calls, input_tokens=tokens_in, output_tokens=tokens_out,
                  seconds=time.perf_counter() - start, sources=cited.citations, dropped=cited.dropped,
                  uncited=cited.uncited, short_answer_check=cited.short_answer_check, replies=replies)


def _withheld(long_answer: str, short_answer: str) -> str:
    return f"{strip_citations(long_answer).strip()} (short answer: {short_answer})".strip()


def _two_step(question: str, result: RetrievalResult, model: ChatModel) -> tuple[str, str, int, int, int,
                                                                              tuple[str, str]]:
    """LongRAG's reader: a cited long answer from the whole context, then a short answer taken from it."""
    items = result.items
    asked = {"role": "user", "content": f"Sources:\n{numbered_context(items)}\n\nQuestion: {question}"}
    if getattr(model, "schema_output", False) and items:
        long = model.complete([{"role": "system", "content": STRUCTURED_PROMPT}, *STRUCTURED_EXAMPLE, asked],
                              max_tokens=STRUCTURED_ANSWER_TOKENS, schema=answer_schema(len(items)))
        long_answer = render_statements(statements_of(long.text), items)
    else:
        long = model.complete([{"role": "system", "content": LONG_PROMPT}, *LONG_EXAMPLE, asked],
                              max_tokens=LONG_ANSWER_TOKENS)
        long_answer = resolve_numbers(long.text.strip(), items)
    short = model.complete([{"role": "system", "content": SHORT_PROMPT}, *SHORT_EXAMPLE,
                            {"role": "user", "content": f"Question: {question}\nLong answer: "
                                                        f"{strip_citations(long_answer)}\nShort answer:"}],
                           max_tokens=SHORT_ANSWER_TOKENS)
    return (long_answer, _clean_short(short.text), 2, long.input_tokens + short.input_tokens,
            long.output_tokens + short.output_tokens, (long.text, short.text))


def context_sentences(items: list[ContextItem]) -> list[tuple[ContextItem, str]]:
    """(item, sentence) for every sentence of the context in order, document headers left out."""
    return [(item, sentence) for item in items for sentence in item_sentences(item)]


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
    item, sentence = sentences[int(np.argmax(scores))]
    return f"{sentence} [{item.citation}]", short_span(sentence, question), 0, 0, 0
