"""The link boost from the corpus: a unit's best score shared evenly by its k members, 1/k averaged over
the corpus's linked documents."""
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_longrag import publish, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates
from rag.retrieval.members import member_table
from rag.retrieval.request import Request, Tools
from rag.store.rows import MemberRow

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
    return {i.doc_id: i.score for i in ranked.items}


def test_the_default_boost_is_link_share_times_the_corpus_mean_of_one_over_k(linked, embedder):
    """Two linked units (of 2 and 4 members) hold 6 of the 7 documents: the corpus's mean 1/k is 2 / 6."""
    snap = uncommitted(*linked)
    assert snap.current.link_density == pytest.approx(2 / 6)
    assert snap.member_table.link_density(frozenset({"bench"})) == snap.current.link_density  # a reader of all
    assert sorted(len(rows) for rows in snap.current.members.values()) == [1, 2, 4]
    question = "Which towns does the summer festival visit, and who kept the lighthouse?"
    default = scores(linked, embedder, question, LongRAGConfig(hops=1))
    fixed = scores(linked, embedder, question, LongRAGConfig(hops=1, link_rule="fixed", link_boost=1.5 * 2 / 6))
    unboosted = scores(linked, embedder, question, LongRAGConfig(hops=1, link_rule="fixed", link_boost=0.0))
    assert default == pytest.approx(fixed, abs=1e-5) and default != pytest.approx(unboosted, abs=1e-5)
    even = scores(linked, embedder, question, LongRAGConfig(hops=1, link_share=1.0))
    assert even == pytest.approx(scores(linked, embedder, question, LongRAGConfig(
        hops=1, link_rule="fixed", link_boost=2 / 6)), abs=1e-5)


def test_a_corpus_without_links_boosts_nothing(tmp_path, embedder):
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x})
                                                   for d, t, x in DOCS) + "\n")
    snap = uncommitted(*publish(tmp_path / "ws", [tmp_path / "docs.jsonl"], embedder, default_acl=("bench",)))
    assert snap.current.link_density == 0.0 and all(len(rows) == 1 for rows in snap.current.members.values())


def units_of(sizes: list[tuple[int, tuple[str, ...]]]) -> dict[str, list[MemberRow]]:
    """Units of these sizes, each of one ACL (grouping merges documents of one ACL only)."""
    return {f"u{i:02d}": [MemberRow(f"u{i:02d}", p, f"d{i}-{p}", "1", 0, 0, 1, 1, "t", acl, "h") for p in range(k)]
            for i, (k, acl) in enumerate(sizes)}


unit_sizes = st.lists(st.tuples(st.integers(1, 5), st.sampled_from([("pub",), ("pub", "ops")])), min_size=1,
                      max_size=8)


@given(unit_sizes, st.lists(st.tuples(st.integers(1, 5), st.sampled_from([("ops",), ("secret",)])), max_size=8))
def test_a_callers_link_boost_counts_the_units_it_may_read_alone(readable, unreadable):
    """The corpus boost's mean 1/k for "pub" is that of a corpus of its readable units: units it may not read,
    linked or not, change nothing."""
    alone = member_table(units_of(readable)).link_density(frozenset({"pub"}))
    mixed = member_table(units_of(readable + unreadable))
    assert mixed.link_density(frozenset({"pub"})) == alone
    linked = [k for k, _ in readable if k > 1]
    assert alone == (len(linked) / sum(linked) if linked else 0.0)
