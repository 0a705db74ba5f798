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
    """Reference of the breadth pass: each distinct ranked entry's header and best sentence, in rank order."""
    out, seen = [], set()
    queries = [frozenset(content_terms(q)) for q in ranked.queries]
    for entry, hop in zip(ranked.items, ranked.placed_by.tolist()):
        if (entry.doc_id, entry.ranges) in seen:
            continue
        seen.add((entry.doc_id, entry.ranges))
        title, text = snap.texts([(entry.doc_id, entry.doc_version)])[(entry.doc_id, entry.doc_version)]
        s, e = best_first(text, entry.ranges[0], ranked.own.get((entry.unit_id, entry.doc_id, entry.part)),
                          queries[hop])[0]
        block = render_header(title, entry.doc_id, entry.doc_version, entry.part) + text[s:e] + "\n"
        out.append((entry.doc_id, block, default_counter().count_one(block)))
    return out


def test_the_best_sentence_is_the_matched_sub_chunks_sentence_sharing_most_of_the_query():
    text = "Alpha founded the firm. Beta sold tea in Paris. Gamma sold tea and coffee in Paris. Delta ended."
    spans = [(0, 23), (24, 47), (48, 83), (84, 96)]
    hit = Hit("u@1", "d", 0, 24, 83, 0.9)  # the sub-chunk holds the second and third sentences
    asked = frozenset(content_terms("Alpha, tea and coffee in Paris?"))
    order = best_first(text, (0, len(text)), hit, asked)
    assert order[0] == spans[2]  # three terms shared, inside the sub-chunk ("alpha" is outside it)
    assert sorted(order) == spans  # every sentence once, for growing
    assert best_first(text, (0, len(text)), Hit("u@1", "d", 0, 24, 47, 0.9), asked)[0] == spans[1]
    assert best_first(text, (0, len(text)), None, asked)[0] == spans[0]  # no hit of its own: the lead sentence
    assert best_first(text, (0, len(text)), hit, frozenset(content_terms("sold")))[0] == spans[1]  # a tie: the earliest


@pytest.mark.parametrize("question", QUESTIONS)
def test_each_ranked_member_gives_its_header_and_best_sentence_in_rank_order_before_any_grows(sample, embedder,
                                                                                           question):
    snap, ranked = ranking(sample, embedder, question)
    reference = first_sentences(snap, ranked)
    budget = sum(n for _, _, n in reference[:6]) + 5  # six excerpts fit, the seventh does not (it is larger than 5)
    result = pack_extracts(snap, ranked, budget, default_counter())
    expected = [d for d, _, n in reference[:6]] + [d for d, _, n in reference[6:] if n <= 5]
    assert [i.doc_id for i in result.items] == expected
    for item, (_, block, n) in zip(result.items, reference):
        assert item.text.startswith(block[:-1].split("\n", 2)[0])  # the member's own header comes first
        shown = block.split("\n", 2)[2][:-1]
        assert shown in item.text  # its best sentence is shown, whatever it grew by
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
    excerpts = sum(n for _, _, n in reference)
    whole_first = [e for e in ranked.items if e.doc_id == reference[0][0]][0].tokens
    budget = excerpts + whole_first - reference[0][2]  # room for every excerpt, and for the first member whole
    result = pack_extracts(snap, ranked, budget, default_counter())
    assert [i.doc_id for i in result.items] == [d for d, _, _ in reference]
    first = result.items[0]
    assert first.ranges == [e for e in ranked.items if e.doc_id == first.doc_id][0].ranges  # grown whole
    assert all(i.tokens <= n for i, (_, _, n) in zip(result.items[1:], reference[1:]))  # nothing left for the rest
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
