"""Links between documents: explicit (by id or exact title) and derived from title mentions."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol, Sequence

import ahocorasick

from rag.sources.partitions import PartitionSpec
from rag.sources.scan import ReadAs, scan_sources
from rag.text.analysis import has_han, mention_spans

MIN_TITLE_CHARS = 4
MIN_HAN_TITLE_CHARS = 2   # a Chinese name of two characters (北京) is as specific as a four-letter word
MAX_TITLE_TOKENS = 24     # words, or Han characters: longer titles are never looked for


class Linkable(Protocol):
    doc_id: str
    title: str
    links: tuple[str, ...]


@dataclass
class LinkGraph:
    """Undirected adjacency between doc ids, plus the links that pointed nowhere."""

    neighbours: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    missing: list[tuple[str, str]] = field(default_factory=list)

    def add(self, a: str, b: str) -> None:
        if a != b:
            self.neighbours[a].add(b)
            self.neighbours[b].add(a)


@dataclass(frozen=True)
class LinkTargets:
    """Documents another partition publishes: a link to one of them crosses collections, it is not missing."""

    ids: frozenset[str] = frozenset()
    titles: frozenset[str] = frozenset()

    def split(self, links: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(cross-collection links, links that point nowhere) of `links`, each a (doc id, link) pair."""
        found = [pair[1] in self.ids or pair[1] in self.titles for pair in links]
        return [p for p, f in zip(links, found) if f], [p for p, f in zip(links, found) if not f]


    def __or__(self, other: "LinkTargets") -> "LinkTargets":
        return LinkTargets(self.ids | other.ids, self.titles | other.titles)


def targets_in(specs: Iterable[PartitionSpec], links: list[tuple[str, str]], default_acl: tuple[str, ...],
               collection: str | None) -> LinkTargets:
    """The targets of these links that a document in the partitions' files is (by id or title); the partitions'
    files are read one partition at a time, only while some target is still unfound."""
    wanted = {link for _, link in links}
    ids: set[str] = set()
    titles: set[str] = set()
    for spec in specs:
        if not wanted:
            break
        scan = scan_sources([str(spec.folder)], ReadAs(default_acl, collection), {}, lambda files: {},
                            select=spec.selection)
        for doc in scan.parsed.values():
            ids.update({doc.doc_id} & wanted)
            titles.update({doc.title} & wanted)
        wanted -= ids | titles
    return LinkTargets(frozenset(ids), frozenset(titles))


@dataclass(frozen=True)
class LinkCounts:
    """One partition's explicit links: to its own documents, to another partition's, to none."""

    within: int
    cross_collection: int
    missing: int


def count_links(parts: Mapping[str, list[tuple[str, str, Sequence[str]]]]) -> dict[str, LinkCounts]:
    """Per partition, from its current (doc id, title, links): where each explicit link leads."""
    own = {k: LinkTargets(frozenset(d for d, _, _ in docs), frozenset(t for _, t, _ in docs if t))
           for k, docs in parts.items()}
    counts = {}
    for key, docs in parts.items():
        others = [t for k, t in own.items() if k != key]
        elsewhere = LinkTargets(frozenset().union(*(t.ids for t in others)),
                                frozenset().union(*(t.titles for t in others)))
        inside, outside = own[key].split([(d, link) for d, _, links in docs for link in links or ()])
        cross, missing = elsewhere.split(outside)
        counts[key] = LinkCounts(len(inside), len(cross), len(missing))
    return counts


def mentionable(title: str) -> bool:
    """Whether a title is specific enough to be looked for in other documents' texts."""
    if title.isdigit():
        return False
    return len(title) >= (MIN_HAN_TITLE_CHARS if has_han(title) else MIN_TITLE_CHARS)


def build_links(docs: Iterable[Linkable], mentions: Mapping[str, Iterable[str]] | None = None) -> LinkGraph:
    """The link graph; `mentions` (doc id → titles its text mentions) adds derived links, None leaves them out.

    Titles in `mentions` that no document carries now are ignored, so stored mentions may hold past titles.
    """
    docs = list(docs)
    graph = LinkGraph()
    by_id = {d.doc_id for d in docs}
    by_title: dict[str, list[str]] = defaultdict(list)
    for d in sorted(docs, key=lambda d: d.doc_id):
        by_title[d.title].append(d.doc_id)
    for d in docs:
        for link in d.links:
            targets = [link] if link in by_id else by_title.get(link, [])
            if not targets:
                graph.missing.append((d.doc_id, link))
            for t in targets:
                graph.add(d.doc_id, t)
    if mentions is not None:
        titles = {t: ids for t, ids in by_title.items() if mentionable(t)}
        for ids in titles.values():   # paragraphs that share a title (one article split in several documents)
            for other in ids[1:]:
                graph.add(ids[0], other)
        for d in docs:
            for title in mentions.get(d.doc_id, ()):
                for other in titles.get(title, ()):
                    graph.add(d.doc_id, other)
    return graph


def mentioned_titles(text: str, titles: set[str], first_tokens: Mapping[str, set[int]] | None = None) -> set[str]:
    """The titles of `titles` that the text mentions exactly, starting and ending on token boundaries.

    Tokens are words, and single Han characters, so a Chinese title is found inside Chinese text.
    """
    if first_tokens is None:
        first_tokens = first_tokens_of(titles)
    spans = mention_spans(text)
    found: set[str] = set()
    for i, (start, stop) in enumerate(spans):
        lengths = first_tokens.get(text[start:stop])
        if lengths is None:
            continue
        for _, end in spans[i:i + MAX_TITLE_TOKENS]:
            # Comparing lengths first spares slicing and hashing the candidates no title can equal.
            if end - start in lengths and text[start:end] in titles:
                found.add(text[start:end])
    return found


def title_candidates(text: str) -> set[str]:
    """Every run of up to MAX_TITLE_TOKENS tokens of the text: the strings `mentioned_titles` can find as titles."""
    spans = mention_spans(text)
    return {text[start:end] for i, (start, _) in enumerate(spans) for _, end in spans[i:i + MAX_TITLE_TOKENS]}


class TitleScan:
    """Which of many titles each text mentions, in one Aho–Corasick pass over the text whatever their number.

    Every mention is a substring, so none is missed; `mentioned_titles` keeps the substrings on token boundaries."""

    def __init__(self, titles: Iterable[str]):
        self._automaton = ahocorasick.Automaton()
        for title in titles:
            self._automaton.add_word(title, title)
        self._automaton.make_automaton()

    def __call__(self, text: str) -> set[str]:
        occurring = {title for _, title in self._automaton.iter(text)}
        return mentioned_titles(text, occurring) if occurring else set()


def first_tokens_of(titles: Iterable[str]) -> dict[str, set[int]]:
    """The first token of each title, with the lengths of the titles it starts: only where one occurs can a mention
    start, and only a candidate of such a length can be one."""
    out: dict[str, set[int]] = defaultdict(set)
    for t in titles:
        spans = mention_spans(t)
        if spans and spans[0][0] == 0:
            out[t[: spans[0][1]]].add(len(t))
    return dict(out)
