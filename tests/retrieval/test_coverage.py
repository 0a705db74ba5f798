"""Hop coverage in the embedder's space (LongRAGConfig.cover): members ordered by what of the query they add."""
import json

import numpy as np
import pytest
from test_longrag import publish, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.coverage import covering_merge, member_vectors
from rag.retrieval.longrag import LongRAGConfig, interleave, longrag_candidates
from rag.retrieval.request import Request, Tools

CALLER = Caller(frozenset({"bench"}))
# Two paraphrases of the lighthouse's keeper, one page on where she was born, and pages the question does not ask.
DOCS = [
    ("kept", "Harrow Point Lighthouse", "Harrow Point Lighthouse was kept for forty years by Mara Quill."),
    ("kept-again", "Lighthouse keepers of Harrow Point", "For forty years the keeper of Harrow Point Lighthouse "
                                                         "was Mara Quill."),
    ("born", "Mara Quill", "Mara Quill was born in the fishing village of Eddleby in 1851."),
    ("orchard", "Bramwell Orchard", "Bramwell Orchard grows pears on a south-facing slope."),
    ("market", "Fenwick Cross", "Fenwick Cross grew around a market for wool."),
]
QUESTION = "Who kept Harrow Point Lighthouse for forty years, and in which village was that keeper born?"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("cover")
    (root / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x})
                                               for d, t, x in DOCS) + "\n")
    return publish(root / "ws", [root / "docs.jsonl"], embedder, default_acl=("bench",))


def ranked(corpus, embedder, **settings):
    return longrag_candidates(uncommitted(*corpus), Request(CALLER, QUESTION, 4000),
                              Tools(embedder, default_counter()), LongRAGConfig(**settings))


def test_each_member_carries_its_best_subchunk_vector(corpus, embedder):
    snap = uncommitted(*corpus)
    result = ranked(corpus, embedder, hops=1)
    vectors = member_vectors(snap, result.own, result.items)
    query = embedder.encode_query(QUESTION)
    query = query / np.linalg.norm(query)
    for entry, vector in zip(result.items, vectors):
        hit = result.own.get((entry.unit_id, entry.doc_id, entry.part))
        assert float(vector @ query) == pytest.approx(hit.score, abs=2e-3)  # float16 rows
        assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=2e-3)


def expected_order(scores: np.ndarray, vectors: np.ndarray, query: np.ndarray) -> list[int]:
    """The greedy order computed directly: the query's projection on the chosen vectors by least squares."""
    chosen: list[int] = []
    while len(chosen) < len(scores):
        if chosen:
            basis = vectors[chosen].T
            projected = basis @ np.linalg.lstsq(basis, query, rcond=None)[0]
        else:
            projected = np.zeros_like(query)
        adjusted = [scores[i] - projected @ vectors[i] if i not in chosen else -np.inf for i in range(len(scores))]
        chosen.append(int(np.argmax(adjusted)))
    return chosen


@pytest.mark.parametrize("mode", ["hop", "first", "merged"])
def test_one_hop_is_ordered_by_its_score_less_what_the_members_ahead_answered(corpus, embedder, mode):
    snap = uncommitted(*corpus)
    plain = ranked(corpus, embedder, hops=1, lexical_weight=0.0)
    query = embedder.encode_query(QUESTION)
    vectors = member_vectors(snap, plain.own, plain.items).astype(np.float64)
    want = [plain.items[i].doc_id for i in expected_order(plain.items.scores, vectors, query / np.linalg.norm(query))]
    got = [i.doc_id for i in ranked(corpus, embedder, hops=1, lexical_weight=0.0, cover=mode).items]
    assert got == want
    # the premise, and what the order does with it: the paraphrase of the first member gives way
    first_two = {i.doc_id for i in plain.items[:2]}
    assert first_two == {"kept", "kept-again"} and got[0] in first_two and got[1] not in first_two


def test_without_picks_the_merge_is_the_lists_own_and_with_them_each_entry_is_placed_once(corpus, embedder):
    snap = uncommitted(*corpus)
    result = ranked(corpus, embedder, hops=1)
    rows = result.items
    lists = [rows, type(rows)(rows.table, rows.rows[::-1].copy(), rows.scores[::-1].copy())]
    vectors = [member_vectors(snap, result.own, x) for x in lists]
    queries = [embedder.encode_query(QUESTION)] * 2
    none = covering_merge(lists, queries, vectors, interleave, depth=0)
    assert np.array_equal(none.rows, interleave(lists).rows)
    merged = covering_merge(lists, queries, vectors, interleave)
    assert sorted(merged.rows.tolist()) == sorted(rows.rows.tolist())  # each member once, none lost


def test_an_unknown_mode_is_refused(corpus, embedder):
    with pytest.raises(ValueError, match="unknown cover mode"):
        ranked(corpus, embedder, hops=1, cover="terms")
