"""How LongRAG merges its hop lists: rank by rank ("interleave", the default) or by reciprocal rank fusion ("rrf"),
over ranked rows of the current snapshot and over the entries of a past version's hops alike."""
from datetime import datetime, timezone

import numpy as np
import pytest
from conftest import SAMPLES
from test_longrag import GROUPS, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.context import ContextItem
from rag.retrieval.hop_merge import interleave, merge_hops, reciprocal_rank
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates
from rag.retrieval.members import RankedRows, member_table, rows_by_unit
from rag.retrieval.request import Request, Tools
from rag.sources.benchmarks import load_questions
from rag.store.rows import MemberRow


def item(doc_id: str, score: float = 0.0, unit: str | None = "u@1") -> ContextItem:
    return ContextItem(doc_id, "1", doc_id, "", 1, ((0, 1),), score, unit)


def ids(ranked) -> list[str]:
    return [i.doc_id for i in ranked]


def test_interleave_takes_the_hops_rank_by_rank_and_keeps_the_first_occurrence():
    first, second = [item("a"), item("b"), item("c")], [item("x"), item("a"), item("y"), item("z")]
    assert ids(interleave([first, second])) == ["a", "x", "b", "c", "y", "z"]
    assert ids(interleave([first])) == ["a", "b", "c"]


def test_rrf_puts_a_document_two_lists_found_ahead_of_any_that_one_list_found():
    question, branch = [item("a"), item("b"), item("c")], [item("x"), item("c"), item("y")]
    # c: 1/62 + 1/61 beats a and x (1/60 each, first in their lists); interleave would place it fourth.
    assert ids(reciprocal_rank([question, branch], 60)) == ["c", "a", "x", "b", "y"]
    assert ids(interleave([question, branch])) == ["a", "x", "b", "c", "y"]


def test_rrf_ties_keep_the_interleaves_order_and_its_first_entry():
    question, branch = [item("a", 0.9), item("b"), item("c", 0.2)], [item("c", 0.7), item("y"), item("z")]
    merged = reciprocal_rank([question, branch], 60)
    # a, b and y are alone at ranks 0, 1, 1: b and y tie and keep the round robin's order, list 0 first.
    assert ids(merged) == ["c", "a", "b", "y", "z"]
    assert merged[0].score == 0.7  # c's entry from the branch (its rank 0) comes first in the interleave
    assert ids(reciprocal_rank([[item("p"), item("q")], [item("r"), item("s")]], 60)) == ["p", "r", "q", "s"]


def test_a_list_counts_a_member_once_at_its_best_rank():
    parts = [item("a"), item("b"), item("a")]  # the same entry twice in one list (a member of two units)
    # b: 1/61 + 1/61 beats a: 1/60 (a counted twice, 1/60 + 1/62, would lead); a and c tie, the interleave orders them.
    assert ids(reciprocal_rank([parts, [item("c"), item("b")]], 60)) == ["b", "a", "c"]


def test_a_branch_starts_at_its_seed_so_the_questions_best_document_stays_first():
    question, branch = [item("s"), item("d"), item("e")], [item("d"), item("f")]  # s seeded the branch, left out of it
    # Without the seed, d (1/61 + 1/60) would outrank s (1/60); with it s has rank 0 twice and d rank 1 twice.
    assert ids(reciprocal_rank([question, branch], 60))[0] == "d"
    assert ids(merge_hops([question, branch], [None, (question, "s")], "rrf", 60)) == ["s", "d", "e", "f"]
    assert ids(merge_hops([question, branch], [None, (question, "s")], "interleave", 60)) == ["s", "d", "f", "e"]


def test_rows_of_one_table_merge_as_rows_and_as_their_entries_alike():
    docs = ["a", "b", "c", "d", "e", "f", "g"]
    table = member_table(rows_by_unit([MemberRow(f"u{i % 3}@1", i, d, "1", 0, 0, 10, 5 + i, d.upper(), ("g",), d)
                                       for i, d in enumerate(docs)]))

    row = {r.doc_id: i for i, r in enumerate(table.rows)}

    def ranked(order: list[str]) -> RankedRows:
        return RankedRows(table, np.array([row[d] for d in order]), np.linspace(1.0, 0.5, len(order)))

    question, first, second = ranked(["a", "b", "c", "d"]), ranked(["c", "e", "f"]), ranked(["e", "d", "g"])
    seeded = [None, (question, "a"), (question, "b")]
    for rule in ("interleave", "max", "rrf"):
        rows = merge_hops([question, first, second], seeded, rule, 60)
        entries = merge_hops([list(question), list(first), list(second)],
                             [None, (list(question), "a"), (list(question), "b")], rule, 60)
        assert isinstance(rows, RankedRows) and list(rows) == entries
    # a seeds the first branch, b the second (and b is the question's rank 1); c and e tie at 1/62 + 1/61.
    assert ids(merge_hops([question, first, second], seeded, "rrf", 60)) == ["a", "b", "c", "e", "d", "f", "g"]
    with pytest.raises(ValueError, match="hop_merge 'sum'"):
        merge_hops([question], [None], "sum", 60)


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


CALLERS = [frozenset({"support"}), frozenset({"partners", "security-team"}), frozenset(GROUPS)]


@pytest.mark.parametrize("as_of", [False, True])
def test_rrf_reorders_what_the_hops_found_and_adds_nothing_a_caller_may_not_read(sample, embedder, as_of):
    """Rule 1 for the merge: the lists hold readable members only, and rrf returns exactly their members."""
    catalog, _ = sample
    snap, tools = uncommitted(*sample), Tools(embedder, default_counter())
    when = datetime.now(timezone.utc).replace(tzinfo=None) if as_of else None
    acl = {d.doc_id: set(d.acl) for d in catalog.current_documents()}
    reordered = 0
    for q in load_questions(SAMPLES / "questions.jsonl"):
        for groups in CALLERS:
            req = Request(Caller(groups), q.question, 2000, as_of=when)
            ranked = longrag_candidates(snap, req, tools, LongRAGConfig(hop_merge="rrf"))
            fused, plain = ranked.items, longrag_candidates(snap, req, tools, LongRAGConfig()).items
            # A past version's hops have a member table each, so they merge as entries.
            assert isinstance(fused, RankedRows) == (not as_of or ranked.trace["queries"] == 1)
            key = [(i.doc_id, i.doc_version, i.ranges) for i in fused]
            assert sorted(key) == sorted((i.doc_id, i.doc_version, i.ranges) for i in plain)
            assert len(set(key)) == len(key) and all(acl[d] & groups for d, _, _ in key)
            reordered += ids(fused) != ids(plain)
    assert reordered > 0
