"""longrag-units: whole readable units in MaxP order, a unit that does not fit skipped, never a partial unit."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_longrag import GROUPS, WORDS, uncommitted

from rag.models.tokens import default_counter
from rag.query.methods import method as registered
from rag.retrieval.callers import Caller
from rag.retrieval.dense import maxp, nearest
from rag.retrieval.request import Request, Tools


@pytest.fixture(scope="module")
def sample(published_sample):
    return published_sample


def run(sample, embedder, question, groups, budget):
    snap = uncommitted(*sample)
    return snap, registered("longrag-units").run(snap, Request(Caller(frozenset(groups)), question, budget),
                                                 Tools(embedder, default_counter()))


def readable_members(snap, unit_id, groups):
    keys = [k for k in snap.catalog.rows("SELECT unit_id || '@' || unit_version FROM units WHERE status = 'current' "
                                         "AND unit_id = ?", [unit_id])]
    return [(m.doc_id, m.part) for m in sorted(snap.members([keys[0][0]]), key=lambda m: m.position)
            if not set(m.acl).isdisjoint(groups)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.sets(st.sampled_from(GROUPS), min_size=1, max_size=2),
       words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
       budget=st.integers(min_value=100, max_value=9000))
def test_every_unit_is_whole_readable_and_within_budget(sample, embedder, groups, words, budget):
    snap, result = run(sample, embedder, " ".join(words), groups, budget)
    assert result.tokens <= budget
    units = list(dict.fromkeys(i.unit_id for i in result.items))
    for unit_id in units:
        shown = [(i.doc_id, i.part) for i in result.items if i.unit_id == unit_id]
        assert shown == readable_members(snap, unit_id, groups)  # all readable members, in unit order, once
    # Units stay together: the items of one unit are contiguous.
    order = [i.unit_id for i in result.items]
    assert order == [u for u in units for _ in range(order.count(u))]


def test_a_unit_that_does_not_fit_is_skipped_and_the_next_one_tried(sample, embedder):
    groups, question = ["support", "field-engineering"], "offline cache eviction and re-sync batches"
    snap, wide = run(sample, embedder, question, groups, 100_000)
    sizes = {}
    for item in wide.items:
        sizes[item.unit_id] = sizes.get(item.unit_id, 0) + item.tokens
    ranked = list(sizes)  # rank order: units appear in MaxP order when everything fits
    big = next(i for i, u in enumerate(ranked) if any(sizes[u] > sizes[v] for v in ranked[i + 1:]))
    budget = sum(sizes[u] for u in ranked[:big]) + sizes[ranked[big]] - 1
    _, tight = run(sample, embedder, question, groups, budget)
    packed = list(dict.fromkeys(i.unit_id for i in tight.items))
    assert packed[:big] == ranked[:big] and ranked[big] not in packed
    assert len(packed) > big  # a later, smaller unit filled the room the skipped one left


def test_units_are_ranked_by_their_best_subchunk(sample, embedder):
    groups, question = GROUPS, "Which error code means the gateway cache is full?"
    snap, result = run(sample, embedder, question, groups, 100_000)
    caller = Caller(frozenset(groups))
    hits, _ = nearest(snap, embedder.encode_query(question), caller, 200)
    scores = [next(i.score for i in result.items if i.unit_id == u) for u in dict.fromkeys(i.unit_id for i in result.items)]
    assert scores == sorted(scores, reverse=True)
    assert result.items[0].unit_id == next(iter(maxp(hits))).split("@")[0]
    assert "E-217" in result.context()


def test_superseded_version_never_returned(sample, embedder):
    _, result = run(sample, embedder, "How many hours does the offline cache hold telemetry?", GROUPS, 8000)
    assert "72 hours" not in result.context() and all(i.doc_version != "2025" for i in result.items)
