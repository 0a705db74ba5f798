"""boosted_wait="mates": under a budget smaller than a unit, a mate whose place is the link boost's alone packs last;
a mate whose own match earns its place keeps it."""
import json

import numpy as np
import pytest
from test_link_share import DOCS as LINKED
from test_longrag import publish, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.boost_packing import boosted_wait
from rag.retrieval.callers import Caller
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates, pack_ranked
from rag.retrieval.request import Request, Tools
from rag.units.long_units import render_header

# test_link_share's corpus: title mentions make a unit of four (the festival and the three towns it names) and a
# pair (the lighthouse and its keeper); the orchard stands alone. Ormsby Reach is longer here, so that a budget
# below the festival's unit holds the festival, Eddleby and Ormsby Reach and no fourth member.
ORMSBY = ("Ormsby Reach lies at the mouth of a tidal river, where a ferry crosses to the salt flats twice a day in "
          "every season of the year.")
DOCS = [(d, t, ORMSBY if d == "ormsby" else x) for d, t, x in LINKED]
# Eddleby answers half of the question itself; the other towns rank high only through the festival's boost.
QUESTION = "Which village has a stone harbour, and when does the Saltmarsh Festival take place?"
FESTIVAL = {"festival", "eddleby", "fenwick", "ormsby"}
CALLER = Caller(frozenset({"bench"}))


@pytest.fixture(scope="module")
def snap(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("boosted")
    (root / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x})
                                               for d, t, x in DOCS) + "\n")
    return uncommitted(*publish(root / "ws", [root / "docs.jsonl"], embedder, default_acl=("bench",),
                                derive_links=True))


def ranked(snap, embedder, **settings):
    config = LongRAGConfig(hops=1, **settings)
    return longrag_candidates(snap, Request(CALLER, QUESTION, 4000), Tools(embedder, default_counter(), longrag=config),
                              config)


def small_budget(items) -> int:
    """Below the festival's unit: the festival, Eddleby and Ormsby Reach fit, Fenwick Cross does not."""
    return sum(i.tokens for i in items if i.doc_id in FESTIVAL) - 12


def test_the_score_without_the_boost_is_the_unboosted_ranking_score(snap, embedder):
    """`plain` is what a ranking with no link boost scores each member; the orchard, alone, keeps its score."""
    items = ranked(snap, embedder).items
    unboosted = ranked(snap, embedder, link_rule="fixed", link_boost=0.0).items
    plain = dict(zip((i.doc_id for i in items), items.plain))
    assert plain == pytest.approx({i.doc_id: s for i, s in zip(unboosted, unboosted.scores)}, abs=1e-6)
    scores = dict(zip((i.doc_id for i in items), items.scores))
    assert scores["orchard"] == pytest.approx(plain["orchard"])
    assert all(scores[d] > plain[d] for d in FESTIVAL)


def test_the_fixture_ranks_the_festival_and_its_towns_first(snap, embedder):
    """The premise: the boost lifts every town above the pair and the orchard; Eddleby's own match is strong."""
    items = ranked(snap, embedder).items
    order = [i.doc_id for i in items]
    assert set(order[:4]) == FESTIVAL and order[:2] == ["festival", "eddleby"]
    assert [i.doc_id for i in items.packed(small_budget(items))] == ["festival", "eddleby", "ormsby"]


def test_under_a_small_budget_only_the_towns_placed_by_the_boost_wait(snap, embedder):
    items = ranked(snap, embedder).items
    waited = [i.doc_id for i in boosted_wait(items, small_budget(items), "mates")]
    default = [i.doc_id for i in items]
    assert sorted(waited) == sorted(default)
    assert waited[-2:] == ["ormsby", "fenwick"]  # behind every other entry, in their ranked order
    assert waited[:-2] == [d for d in default if d not in {"ormsby", "fenwick"}]  # Eddleby keeps its place


def test_a_unit_the_budget_holds_packs_in_the_ranked_order(snap, embedder):
    items = ranked(snap, embedder).items
    budget = sum(i.tokens for i in items if i.doc_id in FESTIVAL)
    assert np.array_equal(boosted_wait(items, budget, "mates").rows, items.rows)


def test_under_a_small_budget_ormsby_reach_gives_its_place_to_the_lighthouse_and_the_orchard(snap, embedder):
    result = ranked(snap, embedder, boosted_wait="mates")
    budget = small_budget(result.items)
    default = pack_ranked(snap, ranked(snap, embedder), budget)
    waited = pack_ranked(snap, result, budget)
    assert waited.tokens <= budget and default.tokens <= budget
    assert [i.doc_id for i in default.items] == ["festival", "eddleby", "ormsby"]
    assert [i.doc_id for i in waited.items] == ["festival", "eddleby", "lighthouse", "orchard"]
    assert all(i.text.startswith(render_header(i.title, i.doc_id, i.doc_version)) for i in waited.items)


def test_a_reader_who_may_not_read_a_town_gets_no_byte_of_it(tmp_path, embedder):
    """The rule reorders readable members only: a town outside the caller's groups is never packed."""
    (tmp_path / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x, **(
        {"acl": ["staff"]} if d == "eddleby" else {})}) for d, t, x in DOCS) + "\n")
    view = uncommitted(*publish(tmp_path / "ws", [tmp_path / "docs.jsonl"], embedder, default_acl=("bench",),
                                derive_links=True))
    config = LongRAGConfig(hops=1, boosted_wait="mates")
    result = longrag_candidates(view, Request(CALLER, QUESTION, 4000), Tools(embedder, default_counter(),
                                                                               longrag=config), config)
    for budget in (60, 100, 4000):
        packed = pack_ranked(view, result, budget)
        assert "eddleby" not in {i.doc_id for i in packed.items} and packed.tokens <= budget
        assert all("Eddleby is a fishing village" not in i.text for i in packed.items)


def test_with_scope_all_every_entry_the_boost_alone_placed_waits_and_unboosted_ones_do_not(snap, embedder):
    """Under "all" the pair, whose places below the cut include the keeper's share of the lighthouse, waits too;
    the orchard, alone in its unit, has no boost and keeps its place ahead of them."""
    items = ranked(snap, embedder).items
    waited = [i.doc_id for i in boosted_wait(items, small_budget(items), "all")]
    default = [i.doc_id for i in items]
    boosted_only = {"ormsby", "fenwick", "lighthouse", "keeper"}
    assert waited == [d for d in default if d not in boosted_only] + [d for d in default if d in boosted_only]
    assert waited[:3] == ["festival", "eddleby", "orchard"]
