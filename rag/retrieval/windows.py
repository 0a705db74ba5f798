"""A second scorer for LongRAG's hops: the embedder over short title-prepended windows of each list's top members.

The index embeds 112-128-token sub-chunks, so most short paragraphs are one vector; the 64-token anchor with its
title in front ranks MuSiQue's documents better. This re-reads a hop's first members at that grain at query time
(no index bytes) and fuses the two orders by reciprocal rank, so no weight between the scorers is tuned.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag.models.tokens import TokenCounter
from rag.retrieval.context import Candidate, ContextItem
from rag.retrieval.read_state import Snapshot
from rag.units.chunking import subchunks

Entry = Candidate | ContextItem
WINDOW_TARGET, WINDOW_MAX = 56, 64  # the anchor's sentence-aligned chunks (bench/anchor64.py)
RRF_K = 60  # reciprocal-rank fusion's usual constant (Cormack et al. 2009), not tuned here


@dataclass(frozen=True)
class Windows:
    """Each member's window vectors: rows `spans[key]` of `vectors`."""

    spans: dict[tuple, tuple[int, int]]
    vectors: np.ndarray

    def best(self, key: tuple, query: np.ndarray) -> float:
        start, end = self.spans[key]
        return float((self.vectors[start:end] @ query).max()) if end > start else -1.0


def _key(item: Entry) -> tuple:
    return item.doc_id, item.doc_version, item.ranges


def member_windows(snap: Snapshot, embedder, counter: TokenCounter, items: list[Entry]) -> Windows:
    """Embed every distinct member's windows once (a member often sits in several hops' lists)."""
    members = list({_key(i): i for i in items}.values())
    texts = snap.texts([(i.doc_id, i.doc_version) for i in members])
    spans, windows = {}, []
    for item in members:
        title, text = texts[(item.doc_id, item.doc_version)]
        (start, end), = item.ranges[:1] or ((0, len(text)),)
        body = text[start:end]
        first = len(windows)
        windows += [f"{title}\n{body[s.start:s.end]}" for s in subchunks(body, counter, WINDOW_TARGET, WINDOW_MAX)]
        spans[_key(item)] = (first, len(windows))
    vectors = embedder.encode(windows) if windows else np.zeros((0, 1), dtype=np.float32)
    return Windows(spans, vectors)


def rescore_lists(snap: Snapshot, embedder, counter: TokenCounter, lists: list[list[Entry]],
                  queries: list[np.ndarray], depth: int, fusion: str = "rrf") -> list[list[Entry]]:
    """Each list's first `depth` members re-ordered by the fusion of their rank and their best window's rank under
    that list's query ("rrf"), or by the window alone ("windows"); the rest of each list keeps its place."""
    windows = member_windows(snap, embedder, counter, [i for ranked in lists for i in ranked[:depth]])
    return [_reordered(ranked, depth, windows, query, fusion) for ranked, query in zip(lists, queries)]


def _reordered(ranked: list[Entry], depth: int, windows: Windows, query: np.ndarray, fusion: str) -> list[Entry]:
    head = ranked[:depth]
    by_window = sorted(range(len(head)), key=lambda i: (-windows.best(_key(head[i]), query), i))
    window_rank = {i: r for r, i in enumerate(by_window)}
    if fusion == "windows":
        order = by_window
    else:
        order = sorted(range(len(head)), key=lambda i: (-(1 / (RRF_K + i) + 1 / (RRF_K + window_rank[i])), i))
    return [head[i] for i in order] + ranked[depth:]
