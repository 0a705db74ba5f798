"""longrag-extract: LongRAG's own ranking, packed breadth first (each hop list's head whole, then each other member's
header and best sentences in rank order), then the members grown in rank order toward their whole text; the budget
and rule 1 hold as for LongRAG."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_longrag import GROUPS, WORDS, assert_only_readable_bytes, retrieve, uncommitted

from rag.models.tokens import default_counter
from rag.query.methods import method as registered
from rag.retrieval.callers import Caller
from rag.retrieval.dense import Hit
from rag.retrieval.extracts import best_first, pack_extracts
from rag.retrieval.longrag import LongRAGConfig
from rag.retrieval.request import Request, Tools
from rag.text.analysis import content_terms
from rag.units.long_units import render_header

CALLER = Caller(frozenset({"support", "field-engineering", "everyone"}))
QUESTIONS = ["How long can the offline cache hold telemetry?", "Which fuse protects the field wiring?",
             "How do I rotate the gateway certificate?"]


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


def ranking(sample, embedder, question, config=None):
    snap, tools = uncommitted(*sample), Tools(embedder, default_counter(), longrag=config)
    return snap, registered("longrag").rank(snap, Request(CALLER, question, 4000), tools)


def first_sentences(snap, ranked):
    """Reference of the breadth pass: each distinct ranked entry as (doc_id, block, tokens, sentences, head) in rank
    order, a hop list's head whole and every other entry as its excerpt (header and best_first's sentences)."""
    out, seen = [], set()
    queries = [frozenset(content_terms(ranked.queries[0])) | frozenset(content_terms(q)) for q in ranked.queries]
    for pos, (entry, hop) in enumerate(zip(ranked.items, ranked.placed_by.tolist())):
        if (entry.doc_id, entry.ranges) in seen:
            continue
        seen.add((entry.doc_id, entry.ranges))
        title, text = snap.texts([(entry.doc_id, entry.doc_version)])[(entry.doc_id, entry.doc_version)]
        spans, shown = best_first(text, entry.ranges[0], ranked.own.get((entry.unit_id, entry.doc_id, entry.part)),
                                  queries[hop])
        head = pos in ranked.heads
        shown = len(spans) if head else shown
        body = shown_text(text, sorted(spans[:shown])) if shown < len(spans) else \
            text[entry.ranges[0][0]:entry.ranges[0][1]]
        block = render_header(title, entry.doc_id, entry.doc_version, entry.part) + body + "\n"
        out.append((entry.doc_id, block, default_counter().count_one(block), [text[s:e] for s, e in spans[:shown]],
                    head))
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


def test_the_heads_are_each_hop_lists_first_member_the_questions_first(sample, embedder):
    for question in QUESTIONS:
        _, ranked = ranking(sample, embedder, question)
        assert ranked.heads[0] == 0 and ranked.placed_by[0] == 0  # the question's best member leads the merged list
        assert len(ranked.heads) == len(set(ranked.heads)) <= len(ranked.queries)
        assert 1 < len(ranked.queries) == ranked.trace["queries"]
        assert ranking(sample, embedder, question, LongRAGConfig(hops=1))[1].heads == (0,)


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_heads_are_packed_whole_first_as_longrag_renders_them(sample, embedder, question):
    snap, ranked = ranking(sample, embedder, question)
    reference = first_sentences(snap, ranked)
    heads = [r for r in reference if r[4]]
    budget = sum(r[2] for r in heads)  # room for the heads whole and nothing else
    result = pack_extracts(snap, ranked, budget, default_counter())
    assert [(i.doc_id, i.text, i.tokens) for i in result.items] == [(r[0], r[1], r[2]) for r in heads]
    whole = registered("longrag").pack(snap, ranked, 10 ** 6, Tools(embedder, default_counter()))
    rendered = {(i.doc_id, i.ranges): i.text for i in whole.items}
    assert all(rendered[(i.doc_id, i.ranges)] == i.text for i in result.items)  # each head as LongRAG shows it
    assert result.trace["heads"] == len(heads) and result.tokens == budget


@pytest.mark.parametrize("question", QUESTIONS)
def test_then_each_other_member_gives_its_header_and_matching_sentences_in_rank_order(sample, embedder, question):
    snap, ranked = ranking(sample, embedder, question)
    reference = first_sentences(snap, ranked)
    others = [r for r in reference if not r[4]]
    budget = sum(r[2] for r in reference if r[4]) + sum(r[2] for r in others[:6]) + 5  # the seventh is larger than 5
    result = pack_extracts(snap, ranked, budget, default_counter())
    assert [i.doc_id for i in result.items] == [r[0] for r in reference if r[4] or r in others[:6]]  # rank order
    for item, (_, block, n, sentences, _) in zip(result.items, [r for r in reference if r[4] or r in others[:6]]):
        assert item.text.startswith(block.split("\n", 2)[0] + "\n")  # the member's own header comes first
        assert all(s in item.text for s in sentences)  # its excerpt is shown, whatever it grew by
    assert result.tokens <= budget


def test_more_documents_than_whole_members_where_no_head_fits_and_never_fewer_beyond(sample, embedder):
    for question in QUESTIONS:
        for budget in (300, 600, 1000):  # the sample's heads are 400-520 tokens each
            whole = retrieve(sample, embedder, question, CALLER.groups, budget)
            extract = retrieve(sample, embedder, question, CALLER.groups, budget, "longrag-extract")
            shown, members = len({i.doc_id for i in extract.items}), len({i.doc_id for i in whole.items})
            assert shown > members if budget == 300 else shown >= members
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
    grown = next(i for i, r in enumerate(reference) if not r[4])  # the best member that is not a head
    whole = [e for e in ranked.items if e.doc_id == reference[grown][0]][0]
    budget = sum(r[2] for r in reference) + whole.tokens - reference[grown][2]  # every excerpt, and that one whole
    result = pack_extracts(snap, ranked, budget, default_counter())
    assert [i.doc_id for i in result.items] == [r[0] for r in reference]
    assert result.items[grown].ranges == whole.ranges  # grown whole
    assert all(i.tokens == r[2] for k, (i, r) in enumerate(zip(result.items, reference)) if k != grown)  # no more room
    assert result.tokens <= budget


# The same oracle as LongRAG's rule-1 property (tests/retrieval/test_longrag.py), on this packing alone: each example is
# a real query embedding, LanceDB search and catalog read, with ACLs revoked inside a rolled-back transaction.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.sets(st.sampled_from(GROUPS + ["nobody-else"]), min_size=1, max_size=3),
       words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
       budget=st.one_of(st.integers(min_value=20, max_value=500), st.integers(min_value=20, max_value=6000)),
       revoked=st.sets(st.sampled_from(["edge-offline-cache", "error-codes-reference", "install-grounding",
                                        "ssh-hardening", "quick-start-guide"]), max_size=3))
def test_no_byte_from_an_unreadable_document_and_the_budget_never_exceeded(sample, embedder, groups, words, budget,
                                                                           revoked):
    def run(sample_, groups_, question, budget_):
        return retrieve(sample_, embedder, question, groups_, budget_, "longrag-extract")

    assert_only_readable_bytes(sample, embedder, groups, words, budget, revoked, run)


@pytest.mark.parametrize("question", QUESTIONS)
def test_passing_over_members_whose_header_cannot_fit_changes_no_context(sample, embedder, question, monkeypatch):
    import rag.retrieval.extracts as extracts

    snap, ranked = ranking(sample, embedder, question)
    budgets = [60, 150, 400, 700, 1000, 1500, 2600]
    pruned = [pack_extracts(snap, ranked, b, default_counter()) for b in budgets]
    every = extracts._excerpts
    monkeypatch.setattr(extracts, "_excerpts", lambda *args: every(*args[:5]))  # every excerpt built and counted
    for budget, result in zip(budgets, pruned):
        built = pack_extracts(snap, ranked, budget, default_counter())
        assert [(i.doc_id, i.text, i.ranges, i.tokens) for i in result.items] == \
               [(i.doc_id, i.text, i.ranges, i.tokens) for i in built.items]


def test_each_merged_entry_is_placed_by_the_list_ranking_it_highest_and_the_heads_are_each_lists_first():
    from rag.retrieval.context import ContextItem
    from rag.retrieval.longrag import _placing, by_best_score, interleave

    def entry(doc, score):  # a past version's entry: a plain list, no member table
        return ContextItem(doc, "1", doc, f"{doc} text", 10, ((0, 9),), score)

    lists = [[entry("a", 0.9), entry("b", 0.8), entry("c", 0.7)],
             [entry("c", 0.95), entry("d", 0.6)],
             [],
             [entry("b", 0.5), entry("e", 0.4)]]
    merged = interleave(lists)
    assert [e.doc_id for e in merged] == ["a", "c", "b", "d", "e"]
    placed_by, heads = _placing(lists, merged)
    assert placed_by.tolist() == [0, 1, 3, 1, 3]  # b ranks second in list 0 and first in list 3: list 3 places it
    assert heads == (0, 1, 2)  # a, c and b head their lists; the empty list has none
    by_score = by_best_score(lists)
    placed_by, heads = _placing(lists, by_score)
    assert [e.doc_id for e in by_score] == ["c", "a", "b", "d", "e"]
    assert placed_by.tolist() == [1, 0, 3, 1, 3] and heads == (0, 1, 2)  # b scores best in list 0, ranks first in 3
