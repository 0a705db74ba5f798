"""Readers: citation checks on crafted answers, the extractive reader, and the two-step LLM reader over HTTP."""
from __future__ import annotations

import pytest
from test_llm import FakeOpenAI, Reply  # the loopback OpenAI stand-in (tests/ is on sys.path via rootdir)

from rag.answer.citations import Citation
from rag.answer.llm import OpenAIChat
from rag.answer.reader import NOT_IN_SOURCES, Answer, answer, check_citations, context_sentences, short_span
from rag.answer.sources import numbered_context
from rag.retrieval.context import ContextItem, RetrievalResult
from rag.units.long_units import render_header

CACHE = ("The edge cache was introduced in March 2024 to reduce latency. "
         "It stores up to 40 GB of map tiles per site.")
LOGS = "Logs rotate every 24 hours. Old logs are compressed with zstd and kept for 30 days."


def item(doc_id: str, title: str, body: str, score: float = 1.0) -> ContextItem:
    text = render_header(title, doc_id, "2026") + body + "\n"
    return ContextItem(doc_id=doc_id, doc_version="2026", title=title, text=text, tokens=len(text.split()),
                       ranges=((0, len(body)),), score=score)


@pytest.fixture
def result() -> RetrievalResult:
    return RetrievalResult(method="longrag", budget=1000,
                           items=[item("edge-cache", "Offline edge cache", CACHE, 0.9),
                                  item("log-rotation", "Log rotation", LOGS, 0.5)])


def test_citations_of_supported_sentences_are_valid_and_locatable(result):
    text = "The edge cache was introduced in March 2024 [edge-cache]. Logs rotate every 24 hours [log-rotation]."
    assert check_citations(text, result.items) == (["edge-cache", "log-rotation"], True, 1.0)


def test_a_citation_of_a_document_outside_the_context_is_invalid(result):
    cited, valid, locatable = check_citations(
        "The edge cache was introduced in March 2024 [edge-cache]. It also rotates logs [ops-manual].", result.items)
    assert cited == ["edge-cache", "ops-manual"]
    assert valid is False
    assert locatable == 0.5


def test_a_quote_missing_from_the_cited_document_is_not_locatable(result):
    cited, valid, locatable = check_citations(
        'The edge cache docs say "tiles are flushed every hour" [edge-cache].', result.items)
    assert (cited, valid, locatable) == (["edge-cache"], True, 0.0)


def test_a_verbatim_quote_is_located_whatever_its_case_and_spacing(result):
    _, _, locatable = check_citations('Each site "stores up to 40 GB of  Map tiles" [edge-cache].', result.items)
    assert locatable == 1.0


def test_a_sentence_citing_the_wrong_document_is_not_locatable(result):
    _, valid, locatable = check_citations("Old logs are compressed with zstd [edge-cache].", result.items)
    assert valid is True
    assert locatable == 0.0


def test_copied_headers_and_multiple_ids_in_one_bracket_cite_documents_that_support_it_together(result):
    cited, valid, locatable = check_citations(
        "Logs rotate every 24 hours and the edge cache reduces latency [log-rotation · version 2026; edge-cache].",
        result.items)
    assert (cited, valid) == (["log-rotation", "edge-cache"], True)
    assert locatable == 1.0
    assert check_citations("Logs rotate every 24 hours and the edge cache reduces latency [edge-cache].",
                           result.items)[2] == 0.0


def test_a_citation_standing_after_the_period_supports_the_sentence_before_it(result):
    assert check_citations("Old logs are kept for 30 days. [log-rotation]", result.items)[2] == 1.0


def test_an_answer_without_citations_is_not_valid(result):
    assert check_citations("Logs rotate every 24 hours.", result.items) == ([], False, 0.0)


def test_context_sentences_leave_the_document_headers_out(result):
    sentences = context_sentences(result.items)
    assert (sentences[0][0].doc_id, sentences[0][1]) == ("edge-cache",
                                                         "The edge cache was introduced in March 2024 to reduce latency.")
    assert len(sentences) == 4
    assert not any("##" in s or "version 2026" in s for _, s in sentences)


def test_short_span_trims_the_words_of_the_question_from_both_ends_of_the_sentence():
    sentence = "The edge cache was introduced in March 2024 to reduce latency."
    assert short_span(sentence, "When was the edge cache introduced?") == "in March 2024 to reduce latency"
    assert short_span(sentence, "Why was the edge cache introduced? To reduce latency?") == "in March 2024"
    assert short_span("Edge cache.", "edge cache?") == "Edge cache"


def test_extractive_reader_answers_with_the_most_similar_sentence_and_cites_it(result, embedder):
    got = answer("How long are old logs kept?", result, None, embedder)
    assert got.long_answer == "Old logs are compressed with zstd and kept for 30 days [log-rotation]."
    assert got.short_answer == "compressed with zstd and kept for 30 days"
    assert (got.citations, got.citations_valid, got.citation_locatable) == (["log-rotation"], True, 1.0)
    assert (got.reader, got.llm_calls, got.input_tokens, got.output_tokens) == ("extractive", 0, 0, 0)


def test_extractive_reader_is_deterministic_and_breaks_ties_by_rank(embedder):
    same = "Backups run nightly at two."
    tied = RetrievalResult("elite", 100, [item("first", "A", same, 0.9), item("second", "B", same, 0.8)])
    answers = {answer("When do backups run?", tied, None, embedder).long_answer for _ in range(3)}
    assert answers == {"Backups run nightly at two [first]."}
    assert answer("When do backups run?", tied, None).citations == ["first"]


def test_extractive_reader_without_an_embedder_uses_word_overlap(result):
    got = answer("What is compressed with zstd?", result, None)
    assert got.citations == ["log-rotation"]
    assert got.long_answer.startswith("Old logs are compressed with zstd")


def test_an_empty_context_gets_an_empty_answer_without_citations():
    got = answer("Anything?", RetrievalResult("longrag", 100, []), None)
    assert (got.long_answer, got.citations, got.citations_valid) == ("", [], False)


def test_two_step_reader_asks_for_a_long_then_a_short_answer(result):
    replies = [Reply(text="The edge cache was introduced in March 2024 [1].", prompt_tokens=120,
                     completion_tokens=15),
               Reply(text="Short answer: March 2024.", prompt_tokens=40, completion_tokens=4)]
    question = "When was the edge cache introduced?"
    with FakeOpenAI(replies) as server:
        got = answer(question, result, OpenAIChat(server.base_url, "tiny", max_retries=0))
    long_prompt = " ".join(m["content"] for m in server.requests[0]["messages"])
    short_prompt = " ".join(m["content"] for m in server.requests[1]["messages"])
    assert numbered_context(result.items) in long_prompt and question in long_prompt
    assert "[2] Log rotation · log-rotation · version 2026\nLogs rotate" in long_prompt
    assert "response_format" not in server.requests[0]  # an endpoint of unknown capabilities gets a plain prompt
    assert question in short_prompt and "introduced in March 2024" in short_prompt
    assert "[1]" not in short_prompt and "[edge-cache]" not in short_prompt
    assert got == Answer(long_answer="The edge cache was introduced in March 2024 [edge-cache].",
                         short_answer="March 2024", citations=["edge-cache"], citations_valid=True,
                         citation_locatable=1.0, reader="endpoint:tiny", llm_calls=2, input_tokens=160,
                         output_tokens=19, seconds=got.seconds,
                         sources=(Citation("edge-cache", "2026", None, "model-given", 0),),
                         short_answer_check="in cited text",
                         replies=("The edge cache was introduced in March 2024 [1].", "Short answer: March 2024."))
    assert got.seconds > 0


def test_the_replies_an_answer_keeps_give_the_same_answer_when_checked_again(result):
    from bench.citations import Replay  # what `bench/citations.py recite` answers with

    question = "When was the edge cache introduced?"
    with FakeOpenAI([Reply(text="The edge cache came in March 2024 [1]. Logs rotate daily [2].", prompt_tokens=9,
                           completion_tokens=9), Reply(text="March 2024", prompt_tokens=5, completion_tokens=2)]) as server:
        got = answer(question, result, OpenAIChat(server.base_url, "tiny", max_retries=0))
    again = answer(question, result, Replay("tiny", {question: list(got.replies)}, schema_output=False))
    assert (again.long_answer, again.short_answer, again.sources, again.dropped) == (
        got.long_answer, got.short_answer, got.sources, got.dropped)
    assert got.sources and again.replies == got.replies


def test_the_reader_name_says_when_the_model_is_the_local_one(result):
    with FakeOpenAI([Reply(text="Logs rotate daily [log-rotation].")]) as server:
        got = answer("How often do logs rotate?", result, OpenAIChat(server.base_url, "qwen", kind="local"))
    assert got.reader == "local:qwen"
    assert got.short_answer == "Logs rotate daily"


def test_a_reply_nothing_in_the_context_supports_is_withheld_and_says_so(result):
    replies = [Reply(text="Warranties last ten years."), Reply(text="10 years")]
    with FakeOpenAI(replies) as server:
        got = answer("How long is the warranty?", result, OpenAIChat(server.base_url, "tiny", max_retries=0))
    assert got.abstained and got.long_answer == NOT_IN_SOURCES and got.short_answer == ""
    assert (got.citations, got.sources, got.citations_valid) == ([], (), False)
    assert "ten years" in got.withheld and "10 years" in got.withheld
    assert got.to_json()["abstained"] is True


def test_a_reply_whose_short_answer_is_in_the_context_is_kept_and_cited(result):
    replies = [Reply(text="Nobody knows."), Reply(text="40 GB")]
    with FakeOpenAI(replies) as server:
        got = answer("How much does the cache hold?", result, OpenAIChat(server.base_url, "tiny", max_retries=0))
    assert not got.abstained and got.short_answer == "40 GB"
    assert [(c.doc_id, c.origin) for c in got.sources] == [("edge-cache", "attributed")]
