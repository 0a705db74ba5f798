"""Planning facts stored per document version, so an unchanged document is never re-tokenised or re-scanned.

A version's title and text never change, so the token count of its rendered block, its parts when it is
larger than the cap and the titles its text mentions are computed once. Titles in `mention_titles` are the
ones every stored mention list was checked for; titles new to that set are looked for in the stored texts, a few
through a `contains` join and many in one pass over each distinct text (rag.units.linking.TitleScan), so the scan
never grows with texts × many titles. A token index of the texts did that before: it held ~63 rows per version and
was slower than the substring scan (bench/storage.py).
The groups of each link-connected component are kept by signature.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pyarrow as pa

from rag.models.tokens import TokenCounter
from rag.sources.documents import Document
from rag.store.arrow_sql import registered
from rag.store.catalog import Catalog
from rag.units.chunking import Span
from rag.units.components import Component, PlanDoc
from rag.units.linking import TitleScan, first_tokens_of, mentionable, mentioned_titles, title_candidates
from rag.units.long_units import UnitPlan, assemble, oversize_parts, render_member

# Up to this many new titles, DuckDB's `contains` join (one comparison per stored text and title, in C) costs less
# than carrying every stored text into Python for one Aho–Corasick pass; past it, the join grows with texts × titles
# (measured at 40K stored texts: the two meet between 100 and 1,000 titles).
CONTAINS_JOIN_TITLES = 100
# Up to this many new versions, the titles their texts may mention are found by looking up each run of their words
# among the current titles (~24 a word); past it, every current title is read and matched. A one-document edit at
# 670K titles spent 5.7 s of its 10.6 s units step reading and indexing every title.
SPAN_LOOKUP_VERSIONS = 100


@dataclass
class PlanFacts:
    docs: list[PlanDoc]
    mentions: dict[str, set[str]]
    computed: int        # versions tokenised and scanned in this run
    titles_checked: int  # titles new to the mention index, looked for in the documents holding their tokens


class FactStore:
    """The catalog's stored planning facts (the SQL for them lives here, on the catalog's connection)."""

    def __init__(self, catalog: Catalog, counter: TokenCounter):
        self.catalog = catalog
        self.counter = counter

    def plan_facts(self, scope: list[str] | None = None) -> PlanFacts:
        """Facts of every current document version (of `scope`'s documents only, if given), the missing ones computed
        and stored first."""
        computed, checked = self.complete(scope)
        return PlanFacts(self.docs(scope), self.mentions(scope), computed, checked)

    def complete(self, scope: list[str] | None = None) -> tuple[int, int]:
        """Compute and store the facts of the current versions (of `scope`'s documents) that have none, and look for
        titles new to the corpus in the stored texts: (versions computed, titles checked)."""
        cat = self.catalog
        where, params = _within(scope)
        missing = cat.rows(
            "SELECT d.doc_id, d.version FROM documents d LEFT JOIN doc_facts f USING (doc_id, version) "
            f"WHERE d.status = 'current' AND f.fact_id IS NULL {where} ORDER BY 1", params)
        new = {t for (t,) in cat.rows(
            "SELECT DISTINCT title FROM documents d WHERE status = 'current' "
            "AND NOT EXISTS (SELECT 1 FROM mention_titles m WHERE m.title = d.title)") if mentionable(t)}
        left = [t for (t,) in cat.rows(
            "SELECT title FROM mention_titles m WHERE NOT EXISTS "
            "(SELECT 1 FROM documents d WHERE d.status = 'current' AND d.title = m.title) ORDER BY 1")]
        texts = cat.document_texts(missing)
        (last,), = cat.rows("SELECT coalesce(max(fact_id), 0) FROM doc_facts")
        titles = self._titles_in([texts[k][1] for k in missing]) if missing else set()
        first = first_tokens_of(titles) if missing else {}
        new_ids = {key: last + 1 + n for n, key in enumerate(missing)}
        counts = self.counter.count([render_member(texts[k][0], k[0], k[1], texts[k][1]) for k in missing])
        found = self._mentions_of_new_titles(new)
        with cat.transaction():
            cat.bulk_insert("doc_facts", {
                "fact_id": list(new_ids.values()), "doc_id": [k[0] for k in missing], "version": [k[1] for k in missing],
                "block_tokens": [int(n) for n in counts], "text_chars": [len(texts[k][1]) for k in missing]})
            found += [(new_ids[k], t) for k in missing for t in mentioned_titles(texts[k][1], titles, first)]
            cat.bulk_insert("doc_mentions", {"fact_id": [f for f, _ in found], "title": [t for _, t in found]})
            # A title that left is forgotten, so if it comes back the stored texts are scanned again: versions
            # stored meanwhile were scanned for the titles of their day only.
            if left:
                cat.con.execute("DELETE FROM mention_titles WHERE title IN (SELECT unnest(?))", [left])
            cat.bulk_insert("mention_titles", {"title": sorted(new)})
        return len(missing), len(new)

    def docs(self, scope: list[str] | None = None) -> list[PlanDoc]:
        """The stored facts of the current versions (of `scope`'s documents) as planning documents, by id."""
        where, params = _within(scope)
        return [PlanDoc(doc_id, version, title, tuple(acl), collection, tuple(links), tokens, chars)
                for doc_id, version, title, acl, collection, links, tokens, chars in self.catalog.rows(
                    "SELECT d.doc_id, d.version, d.title, d.acl, d.collection, d.links, f.block_tokens, f.text_chars "
                    "FROM documents d JOIN doc_facts f USING (doc_id, version) "
                    f"WHERE d.status = 'current' {where} ORDER BY d.doc_id", params)]

    def mentions(self, scope: list[str] | None = None) -> dict[str, set[str]]:
        """The titles each current version (of `scope`'s documents) mentions, by document id."""
        out: dict[str, set[str]] = defaultdict(set)
        where, params = _within(scope)
        for doc_id, title in self.catalog.rows(
                "SELECT d.doc_id, m.title FROM documents d JOIN doc_facts f USING (doc_id, version) "
                f"JOIN doc_mentions m USING (fact_id) WHERE d.status = 'current' {where}", params):
            out[doc_id].add(title)
        return out

    def _titles_in(self, texts: list[str]) -> set[str]:
        """The current mentionable titles (of those these texts may mention, when they are few)."""
        if len(texts) > SPAN_LOOKUP_VERSIONS:
            rows = self.catalog.rows("SELECT DISTINCT title FROM documents WHERE status = 'current'")
        else:
            rows = self.catalog.rows("SELECT DISTINCT title FROM documents WHERE status = 'current' AND title IN "
                                     "(SELECT unnest(?))", [sorted(set().union(*map(title_candidates, texts)))])
        return {t for (t,) in rows if mentionable(t)}

    def _mentions_of_new_titles(self, new: set[str]) -> list[tuple[int, str]]:
        """(fact id, title) for each stored version whose text mentions a new title (a pass over the stored texts)."""
        if not new:
            return []
        if len(new) <= CONTAINS_JOIN_TITLES:
            candidates = self.catalog.rows(
                f"SELECT f.fact_id, d.text, list(n.title) FROM doc_facts f JOIN {self.catalog.with_texts} d "
                "USING (doc_id, version) "
                "JOIN (SELECT unnest(?) AS title) n ON contains(d.text, n.title) GROUP BY ALL", [sorted(new)])
            return [(f, t) for f, text, titles in candidates for t in mentioned_titles(text, set(titles))]
        scan = TitleScan(new)
        # Versions that differ only in title (a re-titling, copies) share their text, so it is scanned once.
        texts = self.catalog.rows(
            f"SELECT d.text, list(f.fact_id) FROM doc_facts f JOIN {self.catalog.with_texts} d USING (doc_id, version) "
            "GROUP BY d.text")
        return [(f, t) for text, facts in texts for t in scan(text) for f in facts]

    def parts(self, docs: list[PlanDoc], cap: int) -> dict[str, list[Span]]:
        """The parts of each document over the cap, stored per version and cap."""
        if not docs:
            return {}
        cat = self.catalog
        keys = [(d.doc_id, d.version) for d in docs]
        out: dict[str, list[Span]] = defaultdict(list)
        for doc_id, start, end, tokens in cat.rows(
                "SELECT p.doc_id, p.char_start, p.char_end, p.tokens FROM doc_parts p "
                "JOIN (SELECT unnest(?) AS doc_id, unnest(?) AS version) k USING (doc_id, version) "
                "WHERE p.cap = ? ORDER BY p.doc_id, p.part", [[k[0] for k in keys], [k[1] for k in keys], cap]):
            out[doc_id].append(Span(start, end, tokens))
        todo = [k for k in keys if k[0] not in out]
        texts = cat.document_texts(todo)
        rows = []
        for doc_id, version in todo:
            title, text = texts[(doc_id, version)]
            out[doc_id] = oversize_parts(Document(doc_id, title, text, version, ()), self.counter, cap)
            rows += [(doc_id, version, cap, k, p.start, p.end, p.tokens) for k, p in enumerate(out[doc_id], 1)]
        if rows:
            cat.bulk_insert("doc_parts", {c: [r[i] for r in rows] for i, c in enumerate(
                ("doc_id", "version", "cap", "part", "char_start", "char_end", "tokens"))})
        return out

    def cached_groups(self, comps: list[Component], group_one, scope: list[str] | None = None
                      ) -> dict[str, list[list[str]]]:
        """Every component's groups: kept ones by signature, the others grouped now and kept (the rows of `scope`'s
        documents only, when the components are those of part of the documents).

        A document's row holds its group and position; the component's signature is on its smallest id's row, so
        regrouping a component rewrites only the rows that changed (at 100K documents one component held 58% of
        them, bench/storage.py). A component whose smallest id's row has its signature has its rows as grouped.
        """
        cat = self.catalog
        firsts = pa.table({"first": [c.ids[0] for c in comps], "signature": [c.signature for c in comps]})
        members = pa.table({"first": [c.ids[0] for c in comps for _ in c.ids], "doc_id": [i for c in comps for i in c.ids]})
        with registered(cat.con, "_signatures", firsts), registered(cat.con, "_members", members):
            groups: dict[str, list[list[str]]] = {}
            for sig, grp, doc_id in cat.rows(
                    "SELECT s.signature, g.grp, g.doc_id FROM _signatures s JOIN group_members f ON f.doc_id = s.first "
                    "AND f.signature = s.signature JOIN _members m USING (first) JOIN group_members g "
                    "ON g.doc_id = m.doc_id ORDER BY s.signature, g.grp, g.position"):
                held = groups.setdefault(sig, [])
                if len(held) == grp:
                    held.append([])
                held[grp].append(doc_id)
            fresh = {c.signature: group_one(c) for c in comps if c.signature not in groups}
            first = {c.signature: c.ids[0] for c in comps}
            rows = [(i, g, p, s if i == first[s] else None) for s, grps in fresh.items() for g, grp in enumerate(grps)
                    for p, i in enumerate(grp)]
            made = pa.table({c: [r[i] for r in rows] for i, c in enumerate(("doc_id", "grp", "position", "signature"))},
                            schema=_GROUP_SCHEMA)
            with cat.transaction(), registered(cat.con, "_groups", made):
                within, params = ("doc_id IN (SELECT unnest(?)) AND ", [scope]) if scope is not None else ("", [])
                cat.con.execute(f"DELETE FROM group_members WHERE {within}doc_id NOT IN (SELECT doc_id FROM _members)",
                                params)
                cat.rewrite_changed("group_members", "_groups", ("doc_id", "grp", "position"), ["signature"],
                                    "t.doc_id IN (SELECT doc_id FROM _groups)")
        return groups | fresh


def _within(scope: list[str] | None) -> tuple[str, list]:
    """SQL that keeps the rows of `scope`'s documents (alias d), and its parameters; nothing when None."""
    return ("AND d.doc_id IN (SELECT unnest(?))", [sorted(scope)]) if scope is not None else ("", [])


_GROUP_SCHEMA = pa.schema([("doc_id", pa.string()), ("grp", pa.int32()), ("position", pa.int32()),
                           ("signature", pa.string())])


def plan_from_facts(catalog: Catalog, counter: TokenCounter, cap: int, derive_links: bool) -> UnitPlan:
    """The unit plan of the current documents, equal to `plan_units` over them, from stored facts.

    Only versions never seen are tokenised and scanned, and only components whose signature is new are grouped.
    """
    store = FactStore(catalog, counter)
    facts = store.plan_facts()
    parts = store.parts([d for d in facts.docs if d.tokens > cap], cap)
    plan = assemble(facts.docs, facts.mentions if derive_links else None, cap, lambda d: parts[d.doc_id],
                    store.cached_groups)
    plan.facts_computed = facts.computed
    return plan
