"""The walk over the link graph, on real workspaces: it reaches documents two links from a seed, and a document the
caller cannot read neither appears nor passes its score on."""
import json

import numpy as np
import pytest
from test_longrag import publish, uncommitted

from rag.retrieval.link_walk import doc_graph, walk
from rag.retrieval.members import RankedRows

# Title mentions chain the lighthouse to its keeper (secret) and the keeper to the ferry town; the orchard and
# the mill stand alone, and the mill names the lighthouse, so it is linked to it directly.
DOCS = [
    ("lighthouse", "Harrow Point Lighthouse", "Harrow Point Lighthouse was kept for forty years by Mara Quill.",
     ["pub"]),
    ("keeper", "Mara Quill", "Mara Quill crossed to Ormsby Reach on the ferry every spring.", ["secret"]),
    ("ormsby", "Ormsby Reach", "Ormsby Reach lies at the mouth of a tidal river.", ["pub"]),
    ("orchard", "Bramwell Orchard", "Bramwell Orchard grows pears on a south-facing slope.", ["pub"]),
    ("mill", "Tanner Mill", "Tanner Mill ground grain within sight of Harrow Point Lighthouse.", ["pub"]),
]
PUBLIC, EVERYONE = frozenset({"pub"}), frozenset({"pub", "secret"})


def workspace(root, embedder, docs):
    root.mkdir()
    (root / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x, "acl": acl})
                                               for d, t, x, acl in docs) + "\n")
    return publish(root / "ws", [root / "docs.jsonl"], embedder, derive_links=True)


@pytest.fixture(scope="module")
def both(tmp_path_factory, embedder):
    """The corpus, and the same corpus without the secret document."""
    root = tmp_path_factory.mktemp("walk")
    return (workspace(root / "all", embedder, DOCS),
            workspace(root / "public", embedder, [d for d in DOCS if d[0] != "keeper"]))


def walked(published, groups, restart=0.5) -> dict[str, float]:
    """The walk seeded by the lighthouse alone (the orchard is the list's weakest, so it seeds nothing)."""
    snap = uncommitted(*published)
    table = snap.member_table
    rows = np.array([int(np.flatnonzero(table.doc_codes == table.doc_code_of[d])[0]) for d in ("lighthouse", "orchard")])
    ranked = walk(snap, groups, RankedRows(table, rows, np.array([0.9, 0.2])), restart)
    return {i.doc_id: i.score for i in ranked}


def test_the_graph_holds_the_title_mentions(both):
    graph = doc_graph(uncommitted(*both[0]))
    edges = {(graph.ids[a], graph.ids[b]) for a, b in zip(graph.src.tolist(), graph.dst.tolist())}
    assert {("lighthouse", "keeper"), ("keeper", "ormsby"), ("mill", "lighthouse")} <= edges
    assert ("lighthouse", "ormsby") not in edges and not any("orchard" in e for e in edges)


def test_the_walk_reaches_two_links_away_through_a_readable_document(both):
    scores = walked(both[0], EVERYONE)
    assert list(scores)[0] == "lighthouse" and scores["keeper"] > scores["ormsby"] > 0
    assert "orchard" not in scores  # a seed of weight 0 with no links gets nothing


def test_an_unreadable_document_neither_appears_nor_passes_its_score_on(both):
    """Walked as the public group, the corpus scores exactly as the same corpus without the secret document."""
    public = walked(both[0], PUBLIC)
    assert "keeper" not in public and "ormsby" not in public
    assert public == pytest.approx(walked(both[1], PUBLIC), abs=1e-6)
    assert set(public) == {"lighthouse", "mill"}


def test_restart_one_keeps_all_the_mass_on_the_seeds(both):
    assert walked(both[0], EVERYONE, restart=1.0) == {"lighthouse": pytest.approx(1.0)}
