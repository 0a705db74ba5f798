"""unit_mates="wait": under a budget smaller than a unit, the unit offers its best member and its mates pack last."""
import json
from dataclasses import replace

import numpy as np
import pytest
from test_link_share import DOCS as LINKED
from test_longrag import publish, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates, pack_ranked
from rag.retrieval.request import Request, Tools
from rag.retrieval.unit_packing import mates_wait
from rag.units.long_units import render_header

# test_link_share's corpus: title mentions make a unit of four (the festival and the three towns it names) and a
# pair (the lighthouse and its keeper); the orchard stands alone. Ormsby Reach is longer here, so that one token
# short of the festival's unit leaves room for the pair, the festival and one more small member.
ORMSBY = ("Ormsby Reach lies at the mouth of a tidal river, where a ferry crosses to the salt flats twice a day in "
          "every season of the year.")
DOCS = [(d, t, ORMSBY if d == "ormsby" else x) for d, t, x in LINKED]
QUESTION = "When does the Saltmarsh Festival take place, and who kept Harrow Point Lighthouse?"
TOWNS = {"eddleby", "fenwick", "ormsby"}


@pytest.fixture(scope="module")
def ranked(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("mates")
    (root / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x})
                                               for d, t, x in DOCS) + "\n")
    snap = uncommitted(*publish(root / "ws", [root / "docs.jsonl"], embedder, default_acl=("bench",),
                                derive_links=True))
    config = LongRAGConfig(hops=1, unit_mates="wait")
    return snap, longrag_candidates(snap, Request(Caller(frozenset({"bench"})), QUESTION, 4000),
                                    Tools(embedder, default_counter(), longrag=config), config)


def festival_tokens(items) -> int:
    return sum(i.tokens for i in items if i.doc_id in TOWNS | {"festival"})


def test_the_festival_leads_and_its_towns_follow_it_in_the_ranking(ranked):
    """The fixture's premise: the festival is its unit's best member and the link boost lifts its towns."""
    _, result = ranked
    order = [i.doc_id for i in result.items]
    assert order.index("festival") < min(order.index(t) for t in TOWNS)
    assert min(order.index(t) for t in TOWNS) < order.index("orchard")


def test_under_a_budget_smaller_than_the_unit_its_mates_wait_behind_every_other_entry(ranked):
    _, result = ranked
    items = result.items
    budget = festival_tokens(items) - 1
    waited = [i.doc_id for i in mates_wait(items, budget)]
    default = [i.doc_id for i in items]
    assert sorted(waited) == sorted(default)
    assert waited[-3:] == [d for d in default if d in TOWNS]  # the towns last, in their ranked order
    assert waited[:-3] == [d for d in default if d not in TOWNS]  # the others keep their order, the festival too


def test_a_unit_the_budget_holds_packs_in_the_ranked_order(ranked):
    _, result = ranked
    items = result.items
    budget = festival_tokens(items)
    assert np.array_equal(mates_wait(items, budget).rows, items.rows)


def test_under_a_small_budget_a_town_gives_its_place_to_the_orchard(ranked):
    """One token short of the festival's unit: the default packs a town after the pair, "wait" the orchard."""
    snap, result = ranked
    budget = festival_tokens(result.items) - 1
    default = pack_ranked(snap, replace(result, unit_mates="ranked"), budget)
    waited = pack_ranked(snap, result, budget)
    assert waited.tokens <= budget and default.tokens <= budget
    assert TOWNS & {i.doc_id for i in default.items} and "orchard" not in {i.doc_id for i in default.items}
    assert {i.doc_id for i in waited.items} == {"lighthouse", "festival", "keeper", "orchard"}
    assert all(i.text.startswith(render_header(i.title, i.doc_id, i.doc_version)) for i in waited.items)
