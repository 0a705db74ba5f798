"""Citations that do not depend on the model's manners: numbered sources, the constrained answer's schema,
attribution after the fact, and the short-answer check."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_llm import FakeOpenAI, Reply  # the loopback OpenAI stand-in (tests/ is on sys.path via rootdir)

from rag.answer.citations import (
    ATTRIBUTED,
    JOINT_WORDS,
    MODEL_GIVEN,
    PREMISE,
    SHORT_ANSWER,
    SHORT_ATTRIBUTED,
    SHORT_IN_CITED,
    SHORT_UNSUPPORTED,
    cite,
    content_words,
    item_sentences,
    short_supported,
)
from rag.answer.llm import OpenAIChat
from rag.answer.reader import answer
from rag.answer.sources import (
    answer_schema,
    numbered_context,
    render_statements,
    resolve_numbers,
    source_line,
    statements_of,
)
from rag.retrieval.context import ContextItem, RetrievalResult
from rag.units.long_units import render_header

CACHE = ("The edge cache was introduced in March 2024 to reduce latency. "
         "It stores up to 40 GB of map tiles per site.")
LOGS = "Logs rotate every 24 hours. Old logs are compressed with zstd and kept for 30 days."
REPORT = "Revenue grew by 12 percent in the third quarter. The Lisbon office opened in May."


def item(doc_id: str, body: str, location: str | None = None, version: str = "2026") -> ContextItem:
    text = render_header(doc_id.replace("-", " ").title(), doc_id, version) + body + "\n"
    return ContextItem(doc_id=doc_id, doc_version=version, title=doc_id.replace("-", " ").title(), text=text,
                       tokens=len(text.split()), ranges=((0, len(body)),), score=1.0, location=location)


ITEMS = [item("edge-cache", CACHE), item("log-rotation", LOGS, version="3"), item("finance/report", REPORT, "p.7")]


def test_the_prompt_lists_numbered_sources_with_title_id_version_and_place():
    assert source_line(3, ITEMS[2]) == "[3] Finance/Report · finance/report · version 2026 · p.7"
    prompt = numbered_context(ITEMS)
    assert prompt.startswith("[1] Edge Cache · edge-cache · version 2026\nThe edge cache was introduced")
    assert "[2] Log Rotation · log-rotation · version 3\nLogs rotate" in prompt
    assert "[edge-cache · version" not in prompt  # the rendered id header is replaced, not repeated


def test_source_numbers_map_back_to_documents_and_places():
    text = "Logs rotate daily [2]. Revenue grew [3, 1]. Old logs [Source 2]. Odd [9]. Kept [edge-cache]."
    assert resolve_numbers(text, ITEMS) == ("Logs rotate daily [log-rotation]. Revenue grew [finance/report p.7; "
                                            "edge-cache]. Old logs [log-rotation]. Odd . Kept [edge-cache].")


def test_the_schema_limits_source_numbers_to_the_real_sources():
    schema = answer_schema(3)
    statement = schema["properties"]["statements"]["items"]
    assert statement["properties"]["sources"]["items"]["enum"] == [1, 2, 3]
    assert statement["required"] == ["statement", "sources"]


def test_a_constrained_reply_renders_as_cited_text_even_when_cut_off():
    reply = json.dumps({"statements": [{"statement": "Logs are kept for 30 days.", "sources": [2]},
                                       {"statement": "Revenue grew by 12 \"percent\".", "sources": [3, 2]}]})
    pairs = statements_of(reply)
    assert pairs == [("Logs are kept for 30 days.", [2]), ('Revenue grew by 12 "percent".', [3, 2])]
    assert render_statements(pairs, ITEMS) == ('Logs are kept for 30 days [log-rotation]. Revenue grew by 12 '
                                               '"percent" [finance/report p.7; log-rotation].')
    assert statements_of(reply[:-40]) == pairs[:1]  # the unfinished second statement is left out


def test_model_given_citations_that_check_out_are_kept_with_version_and_place():
    got = cite("Revenue grew by 12 percent [finance/report p.7]. Logs rotate every 24 hours [log-rotation].",
               "12 percent", ITEMS)
    assert [(c.doc_id, c.version, c.location, c.origin, c.statement) for c in got.citations] == [
        ("finance/report", "2026", "p.7", MODEL_GIVEN, 0), ("log-rotation", "3", None, MODEL_GIVEN, 1)]
    assert (got.dropped, got.uncited, got.short_answer_check) == ((), 0, SHORT_IN_CITED)


def test_a_wrong_or_foreign_citation_is_dropped_and_the_statement_attributed():
    got = cite("Old logs are compressed with zstd [edge-cache]. The cache stores map tiles [ops-manual].",
               "zstd", ITEMS)
    assert got.dropped == ("edge-cache", "ops-manual")
    assert [(c.doc_id, c.origin) for c in got.citations] == [("log-rotation", ATTRIBUTED), ("edge-cache", ATTRIBUTED)]
    assert got.citations[0].sentence == "Old logs are compressed with zstd and kept for 30 days."
    assert got.text == "Old logs are compressed with zstd [log-rotation]. The cache stores map tiles [edge-cache]."


def test_a_statement_found_nowhere_stays_plainly_uncited():
    got = cite("Penguins migrate north in winter.", "north", ITEMS)
    assert (got.citations, got.uncited, got.text) == ((), 1, "Penguins migrate north in winter.")
    assert got.short_answer_check == SHORT_UNSUPPORTED


@pytest.mark.parametrize(("short", "text", "supported"), [
    ("30 days", LOGS, True),                       # normalised substring
    ("thirty days", LOGS, False),                  # words, not numbers spelled out
    ("kept 30 days", LOGS, True),                  # every content word and number present
    ("40 GB of tiles, per site", CACHE, True),
    ("50 GB", CACHE, False),
    ("", CACHE, False),
])
def test_the_short_answer_rule(short, text, supported):
    assert short_supported(short, text) is supported


def test_a_short_answer_outside_the_cited_text_is_attributed_or_flagged():
    got = cite("Logs rotate every 24 hours [log-rotation].", "March 2024", ITEMS)
    assert got.short_answer_check == SHORT_ATTRIBUTED
    assert (got.citations[-1].doc_id, got.citations[-1].statement) == ("edge-cache", -1)
    assert cite("Logs rotate every 24 hours [log-rotation].", "June 1999", ITEMS).short_answer_check \
        == SHORT_UNSUPPORTED
    assert cite("Logs rotate every 24 hours [log-rotation].", "yes", ITEMS).short_answer_check == SHORT_IN_CITED


FILM = item("kiss-and-tell", "Kiss and Tell is a 1945 comedy film starring Shirley Temple as Corliss Archer. "
                             "Two teenage girls cause their parents much concern.")
ACTRESS = item("shirley-temple", "Shirley Temple Black was an actress and diplomat. As an adult she served as Chief "
                                 "of Protocol of the United States.")
SITCOM = item("meet-corliss", "Meet Corliss Archer is a television sitcom that aired on CBS in 1954.")
BRIDGE = [SITCOM, FILM, ACTRESS, *ITEMS]
ASKED = "What position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"


def test_a_statement_resting_on_two_documents_cites_both():
    got = cite("Shirley Temple, who played Corliss Archer in Kiss and Tell, served as Chief of Protocol of the United "
               "States [shirley-temple].", "Chief of Protocol", BRIDGE)
    assert [(c.doc_id, c.origin, c.statement) for c in got.citations] == [
        ("shirley-temple", MODEL_GIVEN, 0), ("kiss-and-tell", ATTRIBUTED, 0)]
    assert got.text.endswith("[shirley-temple; kiss-and-tell].")


def test_the_question_premise_an_answer_skips_is_cited_through_the_sentence_linking_it_to_the_answer():
    got = cite("Shirley Temple served as Chief of Protocol [shirley-temple].", "Chief of Protocol", BRIDGE, ASKED)
    assert [(c.doc_id, c.statement) for c in got.citations] == [("shirley-temple", 0), ("kiss-and-tell", PREMISE)]
    assert got.citations[1].sentence.startswith("Kiss and Tell is a 1945 comedy film")
    # the sitcom names Corliss Archer too, but nothing of the answer: it explains nothing and is not cited
    alone = cite("Shirley Temple served as Chief of Protocol [shirley-temple].", "Chief of Protocol",
                 [SITCOM, ACTRESS], ASKED)
    assert [c.doc_id for c in alone.citations] == ["shirley-temple"]


def test_a_statement_its_citation_holds_whole_gets_no_second_one():
    got = cite("Old logs are compressed with zstd and kept for 30 days [log-rotation].", "30 days", BRIDGE,
               "How long are old logs kept?")
    assert [c.doc_id for c in got.citations] == ["log-rotation"]


def test_a_statement_naming_a_context_document_by_its_title_cites_it():
    players = [item("lisa-raymond", "Lisa Raymond won eleven Grand Slam doubles titles, partnering Liezel Huber."),
               item("liezel-huber", "Liezel Huber is a tennis player who won five Grand Slam doubles titles.")]
    got = cite("Lisa Raymond won more Grand Slam doubles titles than Liezel Huber [lisa-raymond].", "Lisa Raymond",
               players)
    assert [(c.doc_id, c.origin) for c in got.citations] == [("lisa-raymond", MODEL_GIVEN),
                                                              ("liezel-huber", ATTRIBUTED)]
    assert got.citations[1].sentence.startswith("Liezel Huber is a tennis player")
    # a title whose document holds nothing else of the statement is named, not drawn on: not cited
    got = cite("Lisa Raymond often partnered Liezel Huber [lisa-raymond].", "Liezel Huber",
               [players[0], item("liezel-huber", "Liezel Huber was born in Durban.")])
    assert [c.doc_id for c in got.citations] == ["lisa-raymond"]


def test_the_question_naming_the_bridge_document_cites_it_for_the_premise_though_the_answer_holds_its_words():
    actress = item("shirley-temple", "Shirley Temple played Corliss Archer in Kiss and Tell. As an adult she served "
                                     "as Chief of Protocol of the United States.")
    film = item("kiss-and-tell-1945-film", "Kiss and Tell is a 1945 comedy film starring Shirley Temple.")
    film = ContextItem(**{**film.__dict__, "title": "Kiss and Tell (1945 film)"})
    got = cite("Shirley Temple served as Chief of Protocol [shirley-temple].", "Chief of Protocol", [film, actress],
               ASKED)
    assert [(c.doc_id, c.statement) for c in got.citations] == [("shirley-temple", 0),
                                                                 ("kiss-and-tell-1945-film", PREMISE)]


BANDS = [item("the-exies", "The Exies is an American rock band formed in 1997 in Los Angeles."),
         item("circus-diablo", "Circus Diablo is an American rock band, formed in early 2006 by Billy Morrison.")]


def test_a_question_comparing_named_documents_cites_each_whichever_one_the_answer_names():
    compared = "Which band was formed first, The Exies or Circus Diablo?"
    got = cite("The Exies was formed in 1997 [the-exies].", "The Exies", BANDS, compared)
    assert [(c.doc_id, c.origin, c.statement) for c in got.citations] == [
        ("the-exies", MODEL_GIVEN, 0), ("circus-diablo", ATTRIBUTED, PREMISE)]
    assert got.citations[1].sentence.startswith("Circus Diablo is an American rock band")
    # a question about one of them rests on that one alone
    alone = cite("The Exies was formed in 1997 [the-exies].", "1997", BANDS, "When was The Exies formed?")
    assert [c.doc_id for c in alone.citations] == ["the-exies"]
    # an answer nothing supports cites neither: it is withheld, not dressed in the compared documents
    unsupported = cite("Elvis founded them.", "Elvis", BANDS, compared)
    assert unsupported.citations == () and unsupported.short_answer_check == SHORT_UNSUPPORTED


def test_a_short_answer_that_is_a_documents_title_cites_that_document_where_it_matches_the_question():
    car = item("mclaren-mp4-11", "The McLaren MP4/11 was driven by Mika Hakkinen and David Coulthard.")
    asked = "McLaren MP4/11 was driven by what Finnish former professional racing driver?"
    driver = item("mika-hakkinen", "Mika Hakkinen won two titles. He is a Finnish former professional racing driver.")
    got = cite("The McLaren MP4/11 was driven by Mika Hakkinen [mclaren-mp4-11].", "Mika Hakkinen", [car, driver],
               asked)
    assert [(c.doc_id, c.origin, c.statement) for c in got.citations] == [
        ("mclaren-mp4-11", MODEL_GIVEN, 0), ("mika-hakkinen", ATTRIBUTED, SHORT_ANSWER)]
    assert got.citations[1].sentence == "He is a Finnish former professional racing driver."
    # a page that says nothing the question asks of its subject is not cited for it
    born = item("mika-hakkinen", "Mika Hakkinen was born in 1968.")
    got = cite("The McLaren MP4/11 was driven by Mika Hakkinen [mclaren-mp4-11].", "Mika Hakkinen", [car, born], asked)
    assert [c.doc_id for c in got.citations] == ["mclaren-mp4-11"]


words = st.sampled_from(["cache", "logs", "revenue", "lisbon", "office", "tiles", "zstd", "rotate", "quarter", "latency", "site", "days", "march", "penguins", "north", "winter", "budget"])
sentence = st.lists(words, min_size=2, max_size=6).map(lambda ws: " ".join(ws).capitalize() + ".")


@settings(max_examples=150, deadline=None)
@given(bodies=st.lists(st.lists(sentence, min_size=1, max_size=3), min_size=1, max_size=3),
       outside=st.lists(sentence, min_size=1, max_size=2), claims=st.lists(sentence, min_size=1, max_size=3),
       cites=st.lists(st.sampled_from(["[1]", "[2]", "[outside-doc]", ""]), min_size=3, max_size=3),
       named=st.lists(st.integers(0, 3), max_size=3), short_title=st.booleans(), echo=st.booleans())
def test_an_attributed_citation_names_a_context_document_holding_its_sentence(bodies, outside, claims, cites, named,
                                                                               short_title, echo):
    items = [item(f"doc-{k}", " ".join(b)) for k, b in enumerate(bodies)]
    allowed = {i.doc_id: i.text for i in items}
    long_text = resolve_numbers(" ".join(f"{c.rstrip('.')} {mark}." for c, mark in zip(claims, cites)), items)
    # the question may echo the context, name documents by title (some outside it), and the short answer may be a title
    question = " ".join(outside + (bodies[0] if echo else [])) + "".join(f" Doc {k} or" for k in named)
    got = cite(long_text, f"Doc {named[0]}" if named and short_title else claims[0], items, question)
    for c in got.citations:
        assert c.doc_id in allowed  # never "outside-doc", never a document outside the caller's context
        if c.origin == ATTRIBUTED:
            assert c.sentence in item_sentences(next(i for i in items if i.doc_id == c.doc_id))
            assert c.sentence in allowed[c.doc_id]
        if c.statement == PREMISE:  # a premise's sentence holds words of the question, never none
            assert len(set(content_words(question)) & set(content_words(c.sentence))) >= JOINT_WORDS


def test_the_reader_sends_the_schema_only_to_a_model_that_declares_it():
    reply = json.dumps({"statements": [{"statement": "Old logs are kept for 30 days.", "sources": [2]}]})
    result = RetrievalResult("longrag", 1000, ITEMS)
    with FakeOpenAI([Reply(text=reply), Reply(text="30 days")]) as server:
        got = answer("How long are old logs kept?", result, OpenAIChat(server.base_url, "m", schema_output=True))
    sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_object" and sent["schema"] == answer_schema(3)
    assert got.long_answer == "Old logs are kept for 30 days [log-rotation]."
    assert (got.citations, got.citations_valid, got.citation_locatable) == (["log-rotation"], True, 1.0)
    assert got.to_json()["sources"][0]["origin"] == MODEL_GIVEN
    with pytest.raises(ValueError, match="not known to constrain"):
        OpenAIChat(server.base_url, "m").complete([], schema=answer_schema(1))


def test_an_uncited_llm_answer_is_attributed_and_says_so_in_json():
    result = RetrievalResult("longrag", 1000, ITEMS)
    with FakeOpenAI([Reply(text="The Lisbon office opened in May."), Reply(text="May")]) as server:
        got = answer("When did the Lisbon office open?", result, OpenAIChat(server.base_url, "m"))
    assert got.long_answer == "The Lisbon office opened in May [finance/report p.7]."
    assert (got.citations_valid, got.attributed, got.uncited) == (True, 1, 0)
    assert got.to_json()["sources"][0] | {"sentence": None} == {
        "doc_id": "finance/report", "version": "2026", "location": "p.7", "origin": ATTRIBUTED, "statement": 0,
        "sentence": None}


def test_the_evaluation_scores_citations_against_the_gold_documents():
    from rag.evaluation.run import _against_gold
    from rag.sources.benchmarks import Question

    result = RetrievalResult("longrag", 1000, ITEMS)
    with FakeOpenAI([Reply(text="The Lisbon office opened in May [3]. Logs rotate every 24 hours [2]."),
                     Reply(text="June")]) as server:
        got = answer("When did the Lisbon office open?", result, OpenAIChat(server.base_url, "m"))
    gold = Question("q", "When did the Lisbon office open?", "May", ("finance/report", "hr-calendar"))
    assert _against_gold(got, gold) == {"citation_recall": 0.5, "citation_precision": 0.5,
                                        "citations_attributed": 0.0, "short_answer_supported": False}
    assert _against_gold(None, gold)["citation_recall"] is None


def test_rag_ask_prints_each_citation_with_version_place_origin_and_what_it_supports():
    from pipelines.cli import format_citations

    result = RetrievalResult("longrag", 1000, BRIDGE)
    with FakeOpenAI([Reply(text="Shirley Temple served as Chief of Protocol [3]."),
                     Reply(text="Chief of Protocol")]) as server:
        got = answer(ASKED, result, OpenAIChat(server.base_url, "m"))
    assert format_citations(got).splitlines()[1:] == [
        "  shirley-temple v2026 · model-given · statement 1",
        "  kiss-and-tell v2026 · attributed · the question's premise"]
