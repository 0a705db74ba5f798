"""A walk with restart over the corpus's own link graph (HippoRAG's propagation, without its LLM).

Hop one's documents seed a personalised PageRank over the documents the caller may read; the walk ranks the
documents one or two links away from the strong matches, which a second hop's query may not reach. The graph
(explicit links, exact title mentions, shared titles: what grouping uses) is built once per snapshot.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from rag.retrieval.longrag import LongRAGConfig, Ranked, longrag_candidates
from rag.retrieval.members import MemberTable, RankedRows
from rag.retrieval.read_state import Snapshot
from rag.retrieval.request import Request, Tools
from rag.units.linking import build_links, first_tokens_of, mentionable, mentioned_titles

STEPS = 12  # power iterations: at restart 0.3+ the mass left after 12 steps is under 1.5%


@dataclass
class DocGraph:
    """Current documents as nodes 0..n-1 (by doc id) and their undirected links as both directed edges."""

    ids: list[str]
    node_of: dict[str, int]
    src: np.ndarray
    dst: np.ndarray
    _readable: dict = field(default_factory=dict, repr=False)
    _nodes_of_table: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def readable_edges(self, snap: Snapshot, groups: frozenset[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, out-degree) of the subgraph of documents these groups may read, once per group set: an
        unreadable document neither receives nor passes on any score."""
        with self._lock:
            if groups not in self._readable:
                readable = np.zeros(len(self.ids), dtype=bool)
                readable[[self.node_of[d] for d in snap.readable_ids(self.ids, groups)]] = True
                keep = readable[self.src] & readable[self.dst]
                src, dst = self.src[keep], self.dst[keep]
                self._readable[groups] = (src, dst, np.bincount(src, minlength=len(self.ids)).astype(np.float64))
            return self._readable[groups]

    def nodes_of(self, table: MemberTable) -> np.ndarray:
        """Per document code of the member table, its node (-1 for a document the graph does not hold)."""
        with self._lock:
            key = id(table)
            if key not in self._nodes_of_table:
                nodes = np.full(len(table.doc_code_of), -1, dtype=np.int64)
                for doc_id, code in table.doc_code_of.items():
                    nodes[code] = self.node_of.get(doc_id, -1)
                self._nodes_of_table[key] = (table, nodes)  # the table is kept so its id is not reused
            return self._nodes_of_table[key][1]


_GRAPHS: weakref.WeakKeyDictionary[Snapshot, DocGraph] = weakref.WeakKeyDictionary()
_GRAPHS_LOCK = threading.Lock()


def doc_graph(snap: Snapshot) -> DocGraph:
    """The snapshot's document graph, built on first use."""
    with _GRAPHS_LOCK:
        graph = _GRAPHS.get(snap)
        if graph is None:
            graph = _GRAPHS[snap] = _build(snap)
        return graph


def _build(snap: Snapshot) -> DocGraph:
    docs = snap.catalog.current_documents()
    titles = {d.title for d in docs if mentionable(d.title)}
    first = first_tokens_of(titles)
    links = build_links(docs, {d.doc_id: mentioned_titles(d.text, titles, first) for d in docs})
    ids = sorted(d.doc_id for d in docs)
    node_of = {d: i for i, d in enumerate(ids)}
    pairs = [(node_of[a], node_of[b]) for a, near in links.neighbours.items() for b in near]
    src, dst = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    return DocGraph(ids, node_of, src, dst)


def walk(snap: Snapshot, groups: frozenset[str], first: RankedRows, restart: float, seeds: int = 0) -> RankedRows:
    """Members of the documents the walk reaches, by their walk score. The seeds are hop one's documents weighted by
    their scores above the list's weakest (min-max), so the list's tail seeds nothing; with `seeds`, only the list's
    first `seeds` documents seed, and they are left out of the result (hop one has placed them)."""
    graph, table = doc_graph(snap), first.table
    src, dst, degree = graph.readable_edges(snap, groups)
    rows, scores = first.rows, first.scores
    if seeds:
        docs = table.doc_codes[rows]
        top = docs[np.sort(np.unique(docs, return_index=True)[1])][:seeds]
        keep = np.isin(docs, top)
        rows, scores = rows[keep], scores[keep]
    seed = _seed(graph.nodes_of(table)[table.doc_codes[rows]], scores, len(graph.ids), low=first.scores.min()
                 if len(first.scores) else 0.0)
    if not seed.any():
        return RankedRows(table, first.rows[:0], first.scores[:0])
    score = restart * seed
    for _ in range(STEPS):
        spread = np.bincount(dst, weights=score[src] / degree[src], minlength=len(seed))
        stuck = score[degree == 0].sum()  # a document without readable links sends its mass back to the seeds
        score = restart * seed + (1 - restart) * (spread + stuck * seed)
    if seeds:
        score[seed > 0] = 0.0
    return _members_by_score(table, graph.nodes_of(table), score, table.readable(groups))


def _seed(nodes: np.ndarray, scores: np.ndarray, n: int, low: float) -> np.ndarray:
    """Hop one's per-document best score above `low` (the list's weakest), normalised to sum 1."""
    seed = np.zeros(n)
    known = nodes >= 0
    if not known.any():
        return seed
    np.maximum.at(seed, nodes[known], scores[known] - low)
    total = seed.sum()
    return seed / total if total > 0 else seed


def _members_by_score(table: MemberTable, nodes: np.ndarray, score: np.ndarray, readable: np.ndarray) -> RankedRows:
    """Readable members whose document has a walk score, highest first (ties: document code, then position)."""
    node = nodes[table.doc_codes]
    rows = np.flatnonzero(readable & (node >= 0))
    rows = rows[score[node[rows]] > 0]
    value = score[node[rows]]
    order = np.lexsort((table.position[rows], table.doc_codes[rows], -value))
    return RankedRows(table, rows[order], value[order])


def walk_candidates(snap: Snapshot, req: Request, tools: Tools, config: LongRAGConfig, restart: float,
                    seeds: int = 0) -> Ranked:
    """LongRAG's hops with the walk's list merged right after hop one's."""
    return longrag_candidates(snap, req, tools, config,
                              lambda first: [walk(snap, req.caller.groups, first, restart, seeds)])
