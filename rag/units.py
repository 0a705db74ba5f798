"""Long units: members, rendering with visible headers, and the plan that turns documents into units."""
from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

from rag.chunking import pack, sentence_spans
from rag.documents import Document
from rag.grouping import group
from rag.linking import build_links
from rag.tokens import TokenCounter

DEFAULT_CAP = 4000


@dataclass(frozen=True)
class Member:
    """A document (part 0) or the k-th part of a document larger than the cap, inside a unit."""

    doc_id: str
    doc_version: str
    part: int
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class Unit:
    unit_id: str
    acl: tuple[str, ...]
    collection: str
    members: tuple[Member, ...]

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.members)

    @property
    def content_hash(self) -> str:
        key = repr((self.acl, self.collection, [tuple(vars(m).values()) for m in self.members]))
        return hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass
class UnitPlan:
    units: list[Unit]
    missing_links: list[tuple[str, str]] = field(default_factory=list)


def render_header(title: str, doc_id: str, version: str, part: int = 0) -> str:
    """The visible header that lets a reader cite a member: title, id and version."""
    suffix = f" · part {part}" if part else ""
    return f"## {title}\n[{doc_id} · version {version}{suffix}]\n"


def render_member(title: str, doc_id: str, version: str, text: str, part: int = 0) -> str:
    return render_header(title, doc_id, version, part) + text + "\n"


def unit_key(unit_id: str, version: int) -> str:
    """How the index and the publish log name one unit version: `unit_id@version`."""
    return f"{unit_id}@{version}"


def split_unit_key(key: str) -> tuple[str, int]:
    unit_id, version = key.rsplit("@", 1)
    return unit_id, int(version)


def unit_id_for(members: list[tuple[str, int]]) -> str:
    """Stable across re-versions: depends on which documents (and parts) a unit holds, not their versions."""
    key = "\n".join(f"{d}#{p}" for d, p in sorted(members))
    return "u-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def plan_units(docs: list[Document], counter: TokenCounter, cap: int = DEFAULT_CAP,
               derive_links: bool = False) -> UnitPlan:
    """Group current documents into units; same input, same units."""
    docs = sorted(docs, key=lambda d: d.doc_id)
    graph = build_links(docs, derive_links)
    block_tokens = counter.count([render_member(d.title, d.doc_id, d.version, d.text) for d in docs])
    partitions: dict[tuple, list[Document]] = defaultdict(list)
    units: list[Unit] = []
    for d, n in zip(docs, block_tokens):
        if n > cap:
            units += _split_oversize(d, counter, cap)
        else:
            partitions[(d.acl, d.collection)].append(d)
    tokens = {d.doc_id: int(n) for d, n in zip(docs, block_tokens)}
    for (acl, collection), part_docs in sorted(partitions.items()):
        ids = [d.doc_id for d in part_docs]
        by_id = {d.doc_id: d for d in part_docs}
        for grp in group(ids, {i: tokens[i] for i in ids}, graph.neighbours, cap):
            members = tuple(Member(i, by_id[i].version, 0, 0, len(by_id[i].text), tokens[i]) for i in grp)
            units.append(Unit(unit_id_for([(i, 0) for i in grp]), acl, collection, members))
    units.sort(key=lambda u: u.unit_id)
    return UnitPlan(units, sorted(graph.missing))


def _split_oversize(d: Document, counter: TokenCounter, cap: int) -> list[Unit]:
    """Consecutive sentence-aligned parts, each a unit of its own within the cap (header included)."""
    header = counter.count_one(render_header(d.title, d.doc_id, d.version, part=999)) + 2
    budget = cap - header
    parts = pack(sentence_spans(d.text, counter, budget), budget)
    # Exact counts of the rendered blocks, so readers can pack by the stored count without re-tokenising.
    exact = counter.count([render_member(d.title, d.doc_id, d.version, d.text[p.start:p.end], k)
                           for k, p in enumerate(parts, 1)])
    return [
        Unit(unit_id_for([(d.doc_id, k)]), d.acl, d.collection,
             (Member(d.doc_id, d.version, k, p.start, p.end, int(n)),))
        for (k, p), n in zip(enumerate(parts, 1), exact)
    ]
