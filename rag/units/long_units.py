"""Long units: members, rendering with visible headers, and the plan that turns documents into units."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from rag.models.tokens import TokenCounter
from rag.sources.documents import Document
from rag.units.chunking import Span, pack, sentence_spans
from rag.units.components import Component, PlanDoc, group_component, split_components
from rag.units.linking import build_links, first_tokens_of, mentionable, mentioned_titles

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
    cross_links: list[tuple[str, str]] = field(default_factory=list)  # to documents of another partition
    components: int = 0   # link-connected components of documents within the cap
    replanned: int = 0    # components grouped in this run (the others kept their groups)
    facts_computed: int = 0  # document versions tokenised and scanned for title mentions in this run
    kept: list[tuple[int, int]] | None = None  # (tokens, members) of each unit, when a run kept its units unplanned
    first_of: dict[str, str] = field(default_factory=dict)  # planned document within the cap → its component's first
    untouched: list[tuple[int, int]] = field(default_factory=list)  # (tokens, members) of units a partial plan kept

    def sizes(self) -> list[tuple[int, int]]:
        """(tokens, members) of each unit, planned or kept."""
        return self.kept if self.kept is not None else self.untouched + [(u.tokens, len(u.members)) for u in self.units]


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


GroupCache = Callable[[list[Component], Callable[[Component], list[list[str]]]], dict[str, list[list[str]]]]


def plan_units(docs: list[Document], counter: TokenCounter, cap: int = DEFAULT_CAP,
               derive_links: bool = False) -> UnitPlan:
    """Group current documents into units, counting and scanning every text afresh; same input, same units."""
    docs = sorted(docs, key=lambda d: d.doc_id)
    block_tokens = counter.count([render_member(d.title, d.doc_id, d.version, d.text) for d in docs])
    plan_docs = [plan_doc(d, int(n)) for d, n in zip(docs, block_tokens)]
    mentions = None
    if derive_links:
        titles = {d.title for d in docs if mentionable(d.title)}
        first = first_tokens_of(titles)
        mentions = {d.doc_id: mentioned_titles(d.text, titles, first) for d in docs}
    by_id = {d.doc_id: d for d in docs}
    plan = assemble(plan_docs, mentions, cap, lambda pd: oversize_parts(by_id[pd.doc_id], counter, cap))
    plan.facts_computed = len(docs)
    return plan


def plan_doc(d: Document, tokens: int) -> PlanDoc:
    return PlanDoc(d.doc_id, d.version, d.title, d.acl, d.collection, d.links, tokens, len(d.text))


def assemble(docs: list[PlanDoc], mentions: dict[str, set[str]] | None, cap: int,
             parts: Callable[[PlanDoc], list[Span]], cached: GroupCache | None = None,
             context: Sequence[PlanDoc] = ()) -> UnitPlan:
    """The unit plan from planning facts: each component grouped (or its groups taken from `cached`).

    `context`: documents outside the plan that its links and titles resolve among (their own links are not followed).

    `cached(components, group_one)` returns every component's groups by signature, grouping only those it
    does not hold; without it every component is grouped.
    """
    graph = build_links([*docs, *(replace(d, links=()) for d in context)], mentions)
    comps, oversize = split_components(docs, graph, cap)
    by_id = {d.doc_id: d for d in docs}
    grouped: list[Component] = []

    def group_one(comp: Component) -> list[list[str]]:
        grouped.append(comp)
        return group_component(comp, by_id, graph, cap)

    groups = cached(comps, group_one) if cached else {c.signature: group_one(c) for c in comps}
    units: list[Unit] = []
    for d in oversize:
        units += [Unit(unit_id_for([(d.doc_id, k)]), d.acl, d.collection,
                       (Member(d.doc_id, d.version, k, p.start, p.end, p.tokens),))
                  for k, p in enumerate(parts(d), 1)]
    for comp in comps:
        for grp in groups[comp.signature]:
            members = tuple(Member(i, by_id[i].version, 0, 0, by_id[i].chars, by_id[i].tokens) for i in grp)
            units.append(Unit(unit_id_for([(i, 0) for i in grp]), comp.acl, comp.collection, members))
    units.sort(key=lambda u: u.unit_id)
    return UnitPlan(units, sorted(graph.missing), components=len(comps), replanned=len(grouped),
                    first_of={i: c.ids[0] for c in comps for i in c.ids})


def oversize_parts(d: Document, counter: TokenCounter, cap: int) -> list[Span]:
    """Consecutive sentence-aligned parts of a document over the cap, each with its rendered block's count.

    The counts are exact counts of the rendered blocks, so readers can pack by them without re-tokenising.
    """
    header = counter.count_one(render_header(d.title, d.doc_id, d.version, part=999)) + 2
    budget = cap - header
    parts = pack(sentence_spans(d.text, counter, budget), budget)
    exact = counter.count([render_member(d.title, d.doc_id, d.version, d.text[p.start:p.end], k)
                           for k, p in enumerate(parts, 1)])
    return [Span(p.start, p.end, int(n)) for p, n in zip(parts, exact)]
