"""A publish's unit plan re-made only where a change reaches: the components of the changed documents and of the
documents linked to them, before or after the change.

Why that is enough: a document's links, title, mentions, ACL and size are its own, so every link that appears or
goes touches a changed document, except two that a changed title or id moves: the documents sharing a title are
linked to the first of them, and a link resolves to an id before a title. The seeds are the changed documents, the
documents whose links or mentions name a changed document's id or title (old or new), and the documents whose id or
title is such a name or one a changed document links to or mentions; the plan re-groups the seeds' old components
whole. A link from there to any other document crosses ACLs or collections, so the other components keep their
groups and their units stay as they are (tests/store/test_facts.py holds it to a full re-plan after random edits).
"""
from __future__ import annotations

from functools import partial

import pyarrow as pa

from rag.models.tokens import TokenCounter
from rag.store.arrow_sql import registered
from rag.store.catalog import Catalog
from rag.store.catalog_unit_reads import PLAN_KEY
from rag.store.facts import FactStore
from rag.units.long_units import UnitPlan, assemble

_CURRENT = "(SELECT doc_id, version, title, links FROM documents WHERE status = 'current')"


class PlanDocs:
    """What the staged units were planned from, per document (the SQL of `plan_docs` and `plan_stamp` lives here)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def hold(self, inputs: str | None) -> bool:
        """Whether the stored per-document record is that of a plan of these inputs (the current units')."""
        return inputs is not None and self.catalog.rows("SELECT inputs FROM plan_stamp") == [(inputs,)]

    def changed(self) -> list[str]:
        """Ids of the documents added, changed or gone since that plan."""
        return [d for (d,) in self.catalog.rows(
            f"SELECT coalesce(c.doc_id, p.doc_id) FROM (SELECT doc_id, {PLAN_KEY} AS k FROM documents "
            "WHERE status = 'current') c FULL JOIN plan_docs p ON p.doc_id = c.doc_id "
            "WHERE c.k IS DISTINCT FROM p.plan_key ORDER BY 1")]

    def reach(self, changed: list[str], derive_links: bool) -> list[str]:
        """The current documents whose units the change can alter: the seeds and their old components, whole."""
        mentioned = (f"UNION SELECT m.title FROM {_CURRENT} c JOIN doc_facts f USING (doc_id, version) "
                     "JOIN doc_mentions m USING (fact_id) WHERE c.doc_id IN (SELECT unnest($1)) ")
        mentioning = (f"UNION SELECT c.doc_id FROM {_CURRENT} c JOIN doc_facts f USING (doc_id, version) "
                      "JOIN doc_mentions m USING (fact_id) WHERE m.title IN (SELECT name FROM own) ")
        return [d for (d,) in self.catalog.rows(
            # own: the names of the changed documents, old and new; named: those and what they link to or mention
            "WITH own AS (SELECT unnest($1::VARCHAR[]) AS name "
            "UNION SELECT title FROM plan_docs WHERE doc_id IN (SELECT unnest($1)) "
            f"UNION SELECT title FROM {_CURRENT} WHERE doc_id IN (SELECT unnest($1))), "
            f"named AS (SELECT name FROM own UNION SELECT unnest(links) FROM {_CURRENT} "
            f"WHERE doc_id IN (SELECT unnest($1)) {mentioned if derive_links else ''}), "
            f"seeds AS (SELECT doc_id FROM {_CURRENT} WHERE doc_id IN (SELECT name FROM named) "
            "OR title IN (SELECT name FROM named) "
            f"UNION SELECT doc_id FROM (SELECT doc_id, unnest(links) AS link FROM {_CURRENT}) "
            "WHERE link IN (SELECT name FROM own) "
            f"{mentioning if derive_links else ''}UNION SELECT unnest($1::VARCHAR[])) "
            f"SELECT doc_id FROM {_CURRENT} WHERE doc_id IN (SELECT * FROM seeds) OR doc_id IN (SELECT doc_id "
            "FROM plan_docs WHERE first IN (SELECT first FROM plan_docs WHERE doc_id IN (SELECT * FROM seeds))) "
            "ORDER BY 1", [changed])]

    def context(self, scope: list[str], derive_links: bool) -> list[str]:
        """Other current documents that the scope's links, titles and mentions resolve to."""
        mentioned = ("UNION SELECT m.title FROM s JOIN doc_facts f USING (doc_id, version) "
                     "JOIN doc_mentions m USING (fact_id)")
        return [d for (d,) in self.catalog.rows(
            f"WITH s AS (SELECT * FROM {_CURRENT} WHERE doc_id IN (SELECT unnest(?))), "
            f"n AS (SELECT unnest(links) AS name FROM s UNION SELECT title FROM s {mentioned if derive_links else ''}) "
            f"SELECT doc_id FROM {_CURRENT} c WHERE doc_id NOT IN (SELECT doc_id FROM s) "
            "AND (doc_id IN (SELECT name FROM n) OR title IN (SELECT name FROM n)) ORDER BY 1", [scope])]

    def untouched(self, scope: list[str]) -> tuple[list[tuple[int, int]], int]:
        """(tokens, members) of each current unit holding none of these documents, and the components left."""
        units = [(t, n) for _, t, n in self.catalog.rows(
            "SELECT u.unit_id, u.tokens, count(*) FROM units u JOIN unit_members m USING (unit_id, unit_version) "
            "WHERE u.status = 'current' AND NOT EXISTS (SELECT 1 FROM unit_members x WHERE x.unit_id = u.unit_id "
            "AND x.unit_version = u.unit_version AND x.doc_id IN (SELECT unnest(?))) GROUP BY ALL ORDER BY 1",
            [scope])]
        (components,), = self.catalog.rows(
            "SELECT count(DISTINCT first) FROM plan_docs WHERE doc_id NOT IN (SELECT unnest(?))", [scope])
        return units, components

    def record(self, plan: UnitPlan, inputs: str, scope: list[str] | None = None) -> None:
        """Keep what this plan was made from (for `scope`'s documents, the others' records as they were)."""
        cat = self.catalog
        firsts = pa.table({"doc_id": list(plan.first_of), "first": list(plan.first_of.values())},
                          schema=pa.schema([("doc_id", pa.string()), ("first", pa.string())]))
        within, params = ("doc_id IN (SELECT unnest(?))", [scope]) if scope is not None else ("true", [])
        with cat.transaction(), registered(cat.con, "_firsts", firsts):
            cat.con.execute(f"DELETE FROM plan_docs WHERE {within}", params)
            cat.con.execute(f"INSERT INTO plan_docs SELECT doc_id, title, {PLAN_KEY}, f.first FROM documents "
                            f"LEFT JOIN _firsts f USING (doc_id) WHERE status = 'current' AND {within}", params)
            cat.con.execute("DELETE FROM plan_stamp")
            cat.con.execute("INSERT INTO plan_stamp VALUES (?)", [inputs])


def plan_change(catalog: Catalog, counter: TokenCounter, cap: int, derive_links: bool
                ) -> tuple[UnitPlan, list[str]]:
    """The units of the documents a change reaches, and those documents with the ones that left (the scope whose
    current units the plan replaces); the other units are the plan's `untouched`."""
    record = PlanDocs(catalog)
    store = FactStore(catalog, counter)
    changed = record.changed()
    computed, _ = store.complete(changed)   # the changed versions' facts and mentions, which the reach reads
    reach = record.reach(changed, derive_links)
    docs = store.docs(reach)
    parts = store.parts([d for d in docs if d.tokens > cap], cap)
    scope = sorted(set(reach) | set(changed))
    plan = assemble(docs, store.mentions(reach) if derive_links else None, cap, lambda d: parts[d.doc_id],
                    partial(store.cached_groups, scope=scope), context=store.docs(record.context(reach, derive_links)))
    plan.untouched, kept_components = record.untouched(scope)
    plan.components += kept_components
    plan.missing_links = catalog.missing_links()
    plan.facts_computed = computed
    return plan, scope
