"""longrag-extract: LongRAG's own ranking, packed breadth first (each member's header and best sentence in rank
order), then the members grown in rank order toward their whole text; the budget and rule 1 hold as for LongRAG."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_longrag import GROUPS, WORDS, assert_only_readable_bytes, retrieve, uncommitted

from rag.models.tokens import default_counter
from rag.query.methods import method as registered
from rag.retrieval.callers import Caller
from rag.retrieval.dense import Hit
from rag.retrieval.extracts import best_first, pack_extracts
from rag.retrieval.request import Request, Tools
from rag.text.analysis import content_terms
from rag.units.long_units import render_header

CALLER = Caller(frozenset({"support", "field-engineering", "everyone"}))
QUESTIONS = ["How long can the offline cache hold telemetry?", "Which fuse protects the field wiring?",
             "How do I rotate the gateway certificate?"]


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


def ranking(sample, embedder, question):
    snap, tools = uncommitted(*sample), Tools(embedder, default_counter())
    return snap, registered("longrag").rank(snap, Request(CALLER, question, 4000), tools)


def first_sentences(snap, ranked):
    """Reference of the breadth pass: each distinct ranked entry's excerpt (header and best_first's sentences) and its
    tokens, in rank order."""
    out, seen = [], set()
    queries = [frozenset(content_terms(ranked.queries[0])) | frozenset(content_terms(q)) for q in ranked.queries]
    for entry, hop in zip(ranked.items, ranked.placed_by.tolist()):
        if (entry.doc_id, entry.ranges) in seen:
            continue
        seen.add((entry.doc_id, entry.ranges))
        title, text = snap.texts([(entry.doc_id, entry.doc_version)])[(entry.doc_id, entry.doc_version)]
        spans, shown = best_first(text, entry.ranges[0], ranked.own.get((entry.unit_id, entry.doc_id, entry.part)),
                                  queries[hop])
        body = shown_text(text, sorted(spans[:shown])) if shown < len(spans) else \
            text[entry.ranges[0][0]:entry.ranges[0][1]]
        block = render_header(title, entry.doc_id, entry.doc_version, entry.part) + body + "\n"
        out.append((entry.doc_id, block, default_counter().count_one(block), [text[s:e] for s, e in spans[:shown]]))
    return out


def shown_text(text, spans):
    """Sentences in text order: neighbours with only blanks between them as written, others with an ellipsis between."""
    body = text[spans[0][0]:spans[0][1]]
    for (_, end), (s, e) in zip(spans, spans[1:]):
        body += (text[end:s] if not text[end:s].strip() else " … ") + text[s:e]
    return body


def test_an_excerpt_is_the_best_matching_sentence_the_lead_and_the_sub_chunks_other_matches():
    text = "Alpha founded the firm. Beta sold tea in Paris. Gamma sold tea and coffee in Paris. Delta ended."
    spans = [(0, 23), (24, 47), (48, 83), (84, 96)]
    hit = Hit("u@1", "d", 0, 24, 83, 0.9)  # the sub-chunk holds the second and third sentences
    asked = frozenset(content_terms("Alpha, tea and coffee in Paris?"))
    order, shown = best_first(text, (0, len(text)), hit, asked)
    # Three terms shared, then the lead sentence (what the member is about), then two terms, inside the sub-chunk.
    assert order[:shown] == [spans[2], spans[0], spans[1]]
    assert sorted(order) == spans  # every sentence once, for growing
    assert best_first(text, (0, len(text)), Hit("u@1", "d", 0, 24, 47, 0.9), asked) == (
        [spans[1], spans[0], spans[2], spans[3]], 2)  # the third sentence is outside this sub-chunk: it waits
    assert best_first(text, (0, len(text)), None, asked) == ([spans[0], spans[2], spans[1], spans[3]], 1)  # no hit
    nothing = best_first(text, (0, len(text)), hit, frozenset(content_terms("Who ruled Rome?")))
    assert nothing == ([spans[1], spans[0], spans[2], spans[3]], 2)  # no term shared: the sub-chunk's first, the lead


@pytest.mark.parametrize("question", QUESTIONS)
def test_each_ranked_member_gives_its_header_and_matching_sentences_in_rank_order_before_any_grows(sample, embedder,
                                                                                           question):
    snap, ranked = ranking(sample, embedder, question)
    reference = first_sentences(snap, ranked)
    budget = sum(r[2] for r in reference[:6]) + 5  # six excerpts fit, the seventh does not (it is larger than 5)
    result = pack_extracts(snap, ranked, budget, default_counter())
    assert [i.doc_id for i in result.items] == [r[0] for r in reference[:6]]
    for item, (_, block, n, sentences) in zip(result.items, reference):
        assert item.text.startswith(block.split("\n", 2)[0] + "\n")  # the member's own header comes first
        assert all(s in item.text for s in sentences)  # its excerpt is shown, whatever it grew by
    assert result.tokens <= budget


def test_more_documents_than_whole_members_at_small_budgets(sample, embedder):
    for question in QUESTIONS:
        for budget in (300, 1000):
            whole = retrieve(sample, embedder, question, CALLER.groups, budget)
            extract = retrieve(sample, embedder, question, CALLER.groups, budget, "longrag-extract")
            assert len({i.doc_id for i in extract.items}) > len({i.doc_id for i in whole.items})
            assert extract.tokens <= budget


def test_a_budget_that_holds_every_ranked_member_whole_gives_longrags_own_context(sample, embedder):
    for question in QUESTIONS:
        snap, ranked = ranking(sample, embedder, question)
        total = sum(e.tokens for e in {(e.doc_id, e.ranges): e for e in ranked.items}.values())
        whole = registered("longrag").pack(snap, ranked, total, Tools(embedder, default_counter()))
        extract = pack_extracts(snap, ranked, total, default_counter())
        assert [(i.doc_id, i.text, i.ranges, i.tokens) for i in extract.items] == \
               [(i.doc_id, i.text, i.ranges, i.tokens) for i in whole.items]


def test_members_grow_in_rank_order_with_what_the_excerpts_leave(sample, embedder):
    snap, ranked = ranking(sample, embedder, QUESTIONS[0])
    reference = first_sentences(snap, ranked)
    excerpts = sum(r[2] for r in reference)
    whole_first = [e for e in ranked.items if e.doc_id == reference[0][0]][0].tokens
    budget = excerpts + whole_first - reference[0][2]  # room for every excerpt, and for the first member whole
    result = pack_extracts(snap, ranked, budget, default_counter())
    assert [i.doc_id for i in result.items] == [r[0] for r in reference]
    first = result.items[0]
    assert first.ranges == [e for e in ranked.items if e.doc_id == first.doc_id][0].ranges  # grown whole
    assert all(i.tokens == r[2] for i, r in zip(result.items[1:], reference[1:]))  # nothing left for the rest
    assert result.tokens <= budget


# The same oracle as LongRAG's rule-1 property (tests/retrieval/test_longrag.py), on this packing alone: each example is
# a real query embedding, LanceDB search and catalog read, with ACLs revoked inside a rolled-back transaction.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.sets(st.sampled_from(GROUPS + ["nobody-else"]), min_size=1, max_size=3),
       words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
       budget=st.integers(min_value=20, max_value=6000),
       revoked=st.sets(st.sampled_from(["edge-offline-cache", "error-codes-reference", "install-grounding",
                                        "ssh-hardening", "quick-start-guide"]), max_size=3))
def test_no_byte_from_an_unreadable_document_and_the_budget_never_exceeded(sample, embedder, groups, words, budget,
                                                                           revoked):
    def run(sample_, groups_, question, budget_):
        return retrieve(sample_, embedder, question, groups_, budget_, "longrag-extract")

    assert_only_readable_bytes(sample, embedder, groups, words, budget, revoked, run)
