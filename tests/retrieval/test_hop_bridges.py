"""Which of a seed's names a second-hop query carries: with hop_bridges="titles", those that are the title of a
document the caller may read go first, and dates are dropped ("no-dates": only that)."""
import json

import pytest
from test_longrag import publish, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.hop_queries import bridge_query, no_title, readable_title, titles_first
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates, pack_ranked
from rag.retrieval.request import Request, Tools

# The film's paragraph names its star last, after two months, a city and a studio; only the star has a
# document of her own. The other actresses are the distractors a vague second query lands on.
FILM = ("The Glass Orchard is a 1997 drama film shot in March and April in Lisbon by Northwind Pictures, "
        "starring Ilse Varga.")
DOCS = [("film", "The Glass Orchard", FILM, ["bench"]),
        ("varga", "Ilse Varga", "Ilse Varga is an actress. She was born in Debrecen and trained at its theatre.",
         ["bench"]),
        ("studio", "Northwind Pictures", "Northwind Pictures is a film studio founded by two brothers.", ["archivists"])]
DOCS += [(f"a{i}", name, f"{name} is an actress. She was born in {city} and trained at its theatre.", ["bench"])
         for i, (name, city) in enumerate([("Mara Lind", "Lisbon"), ("Eva Kross", "Porto"), ("Ana Sol", "Braga"),
                                           ("Ida Berg", "Faro")])]
QUESTION = "In which city was the star of The Glass Orchard born?"


@pytest.fixture(scope="module")
def films(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("films")
    (root / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x, "acl": acl})
                                               for d, t, x, acl in DOCS) + "\n")
    return publish(root / "ws", [root / "docs.jsonl"], embedder)


def test_titles_first_drops_dates_and_keeps_each_group_in_its_order():
    titles = {"Ilse Varga", "Lisbon"}
    names = ["March", "April", "Lisbon", "Northwind Pictures", "Ilse Varga"]
    assert titles_first(names, titles.__contains__) == ["Lisbon", "Ilse Varga", "Northwind Pictures"]
    assert titles_first(names, titles.__contains__, only=True) == ["Lisbon", "Ilse Varga"]
    assert titles_first(["March", "Northwind Pictures"], titles.__contains__, only=True) == ["Northwind Pictures"]
    question, title = QUESTION, "The Glass Orchard"
    assert bridge_query(question, title, FILM, True, 3) == "city born\nMarch April Lisbon"
    assert bridge_query(question, title, FILM, True, 3, titles.__contains__) == \
        "city born\nLisbon Ilse Varga Northwind Pictures"
    assert bridge_query(question, title, FILM, True, 3, no_title) == "city born\nLisbon Northwind Pictures Ilse Varga"


def test_a_title_counts_only_when_the_caller_may_read_a_document_carrying_it(films):
    snap = uncommitted(*films)
    assert readable_title(snap, frozenset({"bench"}))("Ilse Varga")
    assert not readable_title(snap, frozenset({"bench"}))("Northwind Pictures")  # the studio is the archivists'
    assert readable_title(snap, frozenset({"archivists"}))("Northwind Pictures")
    assert not readable_title(snap, frozenset({"bench"}))("Lisbon")  # a name in texts, no document's title


def test_the_second_hop_reaches_the_star_only_when_titled_names_go_first(films, embedder):
    """In sentence order the query carries March, April and Lisbon, and lands on the actress born in Lisbon."""
    snap, caller = uncommitted(*films), Caller(frozenset({"bench"}))
    found = {}
    for rule in ("order", "titles"):
        config = LongRAGConfig(hop_seeds=1, hop_bridges=rule)
        ranked = longrag_candidates(snap, Request(caller, QUESTION, 4000), Tools(embedder, default_counter()), config)
        assert ranked.trace["seeds"] == ["film"]
        budget = sum(i.tokens for i in ranked.items[:2])
        found[rule] = [i.doc_id for i in pack_ranked(snap, ranked, budget).items]
    assert found["titles"] == ["film", "varga"]
    assert "varga" not in found["order"]
