"""The link boost without a free weight: a unit's best member shares its score among the unit's k members."""
import json

import pytest
from test_longrag import publish, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates
from rag.retrieval.request import Request, Tools

# Title mentions link the documents: a pair (the lighthouse and its keeper) and a unit of four (the festival
# and the three towns it names); the rest stand alone.
DOCS = [
    ("lighthouse", "Harrow Point Lighthouse", "Harrow Point Lighthouse was kept for forty years by Mara Quill."),
    ("keeper", "Mara Quill", "Mara Quill wrote a logbook of storms and ships that passed the point."),
    ("festival", "Saltmarsh Festival", "The Saltmarsh Festival moves each summer between Eddleby, Fenwick Cross "
                                       "and Ormsby Reach."),
    ("eddleby", "Eddleby", "Eddleby is a fishing village with a stone harbour."),
    ("fenwick", "Fenwick Cross", "Fenwick Cross grew around a market for wool."),
    ("ormsby", "Ormsby Reach", "Ormsby Reach lies at the mouth of a tidal river."),
    ("orchard", "Bramwell Orchard", "Bramwell Orchard grows pears on a south-facing slope."),
]


@pytest.fixture(scope="module")
def linked(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("linked")
    (root / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x})
                                               for d, t, x in DOCS) + "\n")
    return publish(root / "ws", [root / "docs.jsonl"], embedder, default_acl=("bench",), derive_links=True)


def scores(linked, embedder, question, config):
    ranked = longrag_candidates(uncommitted(*linked), Request(Caller(frozenset({"bench"})), question, 4000),
                                Tools(embedder, default_counter()), config)
    return {i.doc_id: i.score for i in ranked.items}, {i.doc_id: i.unit_id for i in ranked.items}


def test_a_member_inherits_its_best_neighbours_score_divided_by_the_units_size(linked, embedder):
    question = "Which towns does the summer festival visit, and who kept the lighthouse?"
    shared, units = scores(linked, embedder, question, LongRAGConfig(hops=1, link_rule="members"))
    sizes = {u: list(units.values()).count(u) for u in units.values()}
    assert sizes[units["keeper"]] == 2 and sizes[units["festival"]] == 4 and sizes[units["orchard"]] == 1
    for k, fixed in ((2, 0.5), (4, 0.25), (1, 0.45)):  # a unit of one inherits nothing, whatever the weight
        same, _ = scores(linked, embedder, question, LongRAGConfig(hops=1, link_boost=fixed))
        members = [d for d, u in units.items() if sizes[u] == k]
        assert members and all(shared[d] == pytest.approx(same[d], abs=1e-5) for d in members)
    half, _ = scores(linked, embedder, question, LongRAGConfig(hops=1, link_rule="members", link_share=0.5))
    quarter, _ = scores(linked, embedder, question, LongRAGConfig(hops=1, link_boost=0.25))
    assert half["keeper"] == pytest.approx(quarter["keeper"], abs=1e-5)


def test_the_corpus_rule_boosts_every_member_by_the_corpus_mean_of_one_over_k(linked, embedder):
    """Two linked units (of 2 and 4 members) hold 6 documents: the corpus's share is 2 / 6 for every member."""
    snap = uncommitted(*linked)
    assert snap.current.link_share == pytest.approx(2 / 6)
    question = "Which towns does the summer festival visit, and who kept the lighthouse?"
    corpus, _ = scores(linked, embedder, question, LongRAGConfig(hops=1, link_rule="corpus"))
    fixed, _ = scores(linked, embedder, question, LongRAGConfig(hops=1, link_boost=2 / 6))
    unboosted, _ = scores(linked, embedder, question, LongRAGConfig(hops=1, link_boost=0.0))
    assert corpus == pytest.approx(fixed, abs=1e-5) and corpus != pytest.approx(unboosted, abs=1e-5)
