"""The second scorer over a hop's first members: title-prepended 64-token windows, fused by reciprocal rank."""
import json

import numpy as np
import pytest
from test_longrag import publish, uncommitted

from rag.models.tokens import default_counter
from rag.retrieval.callers import Caller
from rag.retrieval.context import Candidate
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates
from rag.retrieval.request import Request, Tools
from rag.retrieval.windows import WINDOW_MAX, Windows, _reordered, member_windows, rescore_lists
from rag.units.chunking import subchunks

# One long paragraph (two index sub-chunks) whose lighthouse sentence is diluted by the island's other facts.
VARN = ("Varn Island lies in the northern sea, two hours by ferry from the mainland port of Esk. "
        "About nine hundred people live there, most of them in the village of Holm on the sheltered east coast. "
        "The island's fishing fleet lands herring and cod, and a cannery employed half the village until 1970. "
        "Sheep graze the western moors, and the wool is spun in a cooperative mill near the old church. "
        "The school teaches forty children, who finish their studies on the mainland. "
        "Its lighthouse was designed by the engineer Tomas Hale and first lit in 1911. "
        "Winters are wet and windy, summers short and mild, and storms often cancel the ferry for days. "
        "Tourists come for the seabird colonies on the cliffs, the walking trails and the summer music festival. "
        "A small museum in Holm shows boats, nets and photographs of island life.")
DOCS = [("varn", "Varn Island", VARN, ["bench"]),
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
    root = tmp_path_factory.mktemp("island")
    (root / "docs.jsonl").write_text("\n".join(json.dumps({"doc_id": d, "title": t, "text": x, "acl": acl})
                                               for d, t, x, acl in DOCS) + "\n")
    return publish(root / "ws", [root / "docs.jsonl"], embedder)


def ranked(snap, embedder, rescore="none", question=QUESTION):
    config = LongRAGConfig(hops=1, lexical_weight=0.0, rescore=rescore)
    return longrag_candidates(snap, Request(BENCH, question, 4000), Tools(embedder, default_counter()), config).items


def test_a_long_member_is_read_as_title_prepended_windows_of_at_most_64_tokens(island, embedder):
    snap, counter = uncommitted(*island), default_counter()
    items = ranked(snap, embedder)
    windows = member_windows(snap, embedder, counter, items + items)  # a member listed twice is embedded once
    start, end = windows.spans[("varn", "1", items[[i.doc_id for i in items].index("varn")].ranges)]
    spans = subchunks(VARN, counter, 56, WINDOW_MAX)
    assert end - start == len(spans) > 2 and len(windows.vectors) == sum(e - s for s, e in windows.spans.values())
    expected = embedder.encode([f"Varn Island\n{VARN[s.start:s.end]}" for s in spans])
    assert np.allclose(windows.vectors[start:end], expected, atol=1e-5)


def test_windows_order_the_head_by_best_window_and_leave_the_tail_and_the_members(island, embedder):
    snap, counter = uncommitted(*island), default_counter()
    items = ranked(snap, embedder)
    assert "hale" not in [i.doc_id for i in items]  # the archivists' document is never read, nor re-scored
    query = embedder.encode_query(QUESTION)
    by_window, = rescore_lists(snap, embedder, counter, [items], [query], depth=3, fusion="windows")
    windows = member_windows(snap, embedder, counter, items[:3])
    best = [windows.best((i.doc_id, i.doc_version, i.ranges), query) for i in by_window[:3]]
    assert best == sorted(best, reverse=True)
    assert sorted(i.doc_id for i in by_window[:3]) == sorted(i.doc_id for i in items[:3])
    assert by_window[3:] == items[3:]


def test_reciprocal_rank_fusion_needs_no_weight_and_ties_go_to_the_hop_order():
    """Own order a, b, c; windows c, b, a: a and c tie on reciprocal ranks (1/60 + 1/62), b is behind (2/61)."""
    items = [Candidate(d, "1", d, "", 10, ((0, 5),), 1.0 - k / 10) for k, d in enumerate("abcd")]
    vectors = np.array([[0.2, 1.0], [0.5, 1.0], [0.9, 1.0], [1.0, 1.0]], dtype=np.float32)
    windows = Windows({(i.doc_id, "1", ((0, 5),)): (k, k + 1) for k, i in enumerate(items)}, vectors)
    query = np.array([1.0, 0.0], dtype=np.float32)
    assert [i.doc_id for i in _reordered(items, 3, windows, query, "windows")] == list("cbad")
    assert [i.doc_id for i in _reordered(items, 3, windows, query, "rrf")] == list("acbd")


def test_the_rescored_hop_returns_the_same_readable_members(island, embedder):
    snap = uncommitted(*island)
    plain = ranked(snap, embedder)
    for fusion in ("rrf", "windows"):
        assert sorted(i.doc_id for i in ranked(snap, embedder, fusion)) == sorted(i.doc_id for i in plain)
