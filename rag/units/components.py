"""Link-connected components: the pieces a unit plan can be made of independently, and their signatures.

LongRAG groups merge only along links between documents of one (acl, collection), so the groups of a
component depend only on what its signature holds: its ids, their token counts and the links inside it.
Links to other documents (another ACL's, or a document over the cap) are not in it: grouping counts links inside
the component only, and a plan of part of the documents sees the same signatures as a plan of all. A component
whose signature did not change has the groups it had before, which is what lets a run re-plan only what a change
touched.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from rag.units.grouping import group
from rag.units.linking import LinkGraph


@dataclass(frozen=True)
class PlanDoc:
    """What planning needs of a current document version: its fields without the text, and stored counts."""

    doc_id: str
    version: str
    title: str
    acl: tuple[str, ...]
    collection: str
    links: tuple[str, ...]
    tokens: int     # tokens of the rendered member block (header and text)
    chars: int      # characters of the text


@dataclass(frozen=True)
class Component:
    acl: tuple[str, ...]
    collection: str
    ids: tuple[str, ...]
    signature: str


def split_components(docs: list[PlanDoc], graph: LinkGraph, cap: int) -> tuple[list[Component], list[PlanDoc]]:
    """Components of the documents within the cap (links inside one acl and collection), and the oversize ones."""
    fits = {d.doc_id: d for d in docs if d.tokens <= cap}
    parent = {i: i for i in fits}

    def root(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a in fits:
        for b in graph.neighbours.get(a, ()):
            if b in fits and (fits[a].acl, fits[a].collection) == (fits[b].acl, fits[b].collection):
                ra, rb = root(a), root(b)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
    members: dict[str, list[str]] = {}
    for i in sorted(fits):
        members.setdefault(root(i), []).append(i)
    comps = []
    for ids in members.values():
        first = fits[ids[0]]
        comps.append(Component(first.acl, first.collection, tuple(ids), _signature(ids, fits, graph, cap)))
    comps.sort(key=lambda c: c.ids[0])
    return comps, [d for d in docs if d.tokens > cap]


def group_component(comp: Component, docs: dict[str, PlanDoc], graph: LinkGraph, cap: int) -> list[list[str]]:
    """The LongRAG groups of one component, exactly as grouping its whole (acl, collection) would give them."""
    return group(list(comp.ids), {i: docs[i].tokens for i in comp.ids}, graph.neighbours, cap)


def _signature(ids: list[str], docs: dict[str, PlanDoc], graph: LinkGraph, cap: int) -> str:
    inside = set(ids)
    key = repr((cap, [(i, docs[i].tokens, sorted(graph.neighbours.get(i, set()) & inside)) for i in ids]))
    # 64 bits: a signature only tells whether a component changed, and it is the catalog's widest group column
    # (one row per component); a catalog from before regroups each component once, as after any signature change.
    return hashlib.sha256(key.encode()).hexdigest()[:16]
