"""Links between documents: explicit (by id or exact title) and derived from title mentions."""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from rag.documents import Document

_WORD = re.compile(r"\w+")
MIN_TITLE_CHARS = 4
MAX_TITLE_WORDS = 12


@dataclass
class LinkGraph:
    """Undirected adjacency between doc ids, plus the links that pointed nowhere."""

    neighbours: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    missing: list[tuple[str, str]] = field(default_factory=list)

    def add(self, a: str, b: str) -> None:
        if a != b:
            self.neighbours[a].add(b)
            self.neighbours[b].add(a)

    def degree(self, doc_id: str) -> int:
        return len(self.neighbours.get(doc_id, ()))


def build_links(docs: list[Document], derive_from_titles: bool = False) -> LinkGraph:
    graph = LinkGraph()
    by_id = {d.doc_id for d in docs}
    by_title: dict[str, list[str]] = defaultdict(list)
    for d in docs:
        by_title[d.title].append(d.doc_id)
    for d in docs:
        for link in d.links:
            targets = [link] if link in by_id else by_title.get(link, [])
            if not targets:
                graph.missing.append((d.doc_id, link))
            for t in targets:
                graph.add(d.doc_id, t)
    if derive_from_titles:
        for a, b in title_mentions(docs, by_title):
            graph.add(a, b)
    return graph


def title_mentions(docs: list[Document], by_title: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Pairs (doc, other) where doc's text mentions other's exact title as whole words.

    Paragraphs that share a title (one article split in several documents) are linked to each other too.
    """
    titles = {t: ids for t, ids in by_title.items() if len(t) >= MIN_TITLE_CHARS and not t.isdigit()}
    first_words = {m.group() for t in titles for m in [_WORD.search(t)] if m}
    max_words = min(MAX_TITLE_WORDS, max((len(_WORD.findall(t)) for t in titles), default=0))
    pairs: list[tuple[str, str]] = []
    for ids in titles.values():
        pairs += [(ids[0], other) for other in ids[1:]]
    for d in docs:
        words = list(_WORD.finditer(d.text))
        found: set[str] = set()
        for i, w in enumerate(words):
            if w.group() not in first_words:
                continue
            for j in range(i, min(i + max_words, len(words))):
                candidate = d.text[w.start() : words[j].end()]
                if candidate in titles:
                    found.add(candidate)
        for title in found:
            pairs += [(d.doc_id, other) for other in titles[title] if other != d.doc_id]
    return pairs
