"""Invariants between catalog and index, checked after every publish (Dagster asset checks call these)."""
from __future__ import annotations

from dataclasses import dataclass, field

from rag.sources.documents import content_hash
from rag.store.catalog import Catalog
from rag.store.index import MemberKey, SubchunkIndex
from rag.store.row_units import membership_keys
from rag.units.subchunk_recipe import embedded_text


@dataclass
class Finding:
    passed: bool
    summary: str
    examples: list[str] = field(default_factory=list)


def documents_in_exactly_one_unit(catalog: Catalog) -> Finding:
    """Every current document version (each part of a split one) sits in exactly one current unit."""
    rows = catalog.rows("""
        WITH m AS (
            SELECT m.doc_id, m.doc_version, m.part FROM unit_members m
            JOIN units u USING (unit_id, unit_version) WHERE u.status = 'current')
        SELECT d.doc_id || ' v' || d.version || ': in ' || count(m.doc_id) || ' unit(s)'
        FROM documents d LEFT JOIN m ON m.doc_id = d.doc_id AND m.doc_version = d.version
        WHERE d.status = 'current' GROUP BY d.doc_id, d.version
        HAVING count(m.doc_id) = 0 OR count(m.doc_id) <> count(DISTINCT m.part)
        UNION ALL
        SELECT m.doc_id || ' v' || m.doc_version || ': member of a current unit but not current'
        FROM m LEFT JOIN documents d ON d.doc_id = m.doc_id AND d.version = m.doc_version AND d.status = 'current'
        WHERE d.doc_id IS NULL ORDER BY 1""")
    bad = [r[0] for r in rows]
    return Finding(not bad, f"{len(bad)} current document versions not in exactly one current unit", bad[:20])


def index_matches_current_units(catalog: Catalog, index: SubchunkIndex) -> Finding:
    """The index holds sub-chunks of exactly the current units' members."""
    current = set(membership_keys(catalog.unit_membership()))
    indexed = index.member_keys()
    missing, extra = sorted(current - indexed), sorted(indexed - current)
    return Finding(not missing and not extra,
                   f"{len(missing)} members of current units without rows, {len(extra)} indexed members of no "
                   "current unit", [f"missing {_member(k)}" for k in missing[:10]] +
                   [f"extra {_member(k)}" for k in extra[:10]])


def _member(key: MemberKey) -> str:
    doc_id, version, part, start, end, acl, collection = key
    return f"{doc_id} v{version} part {part} [{start}, {end}) {list(acl)} in {collection}"


def no_stale_rows(catalog: Catalog, index: SubchunkIndex) -> Finding:
    """No index row carries a superseded or deleted document version."""
    current = {(d, v) for d, v in catalog.rows("SELECT doc_id, version FROM documents WHERE status = 'current'")}
    table = index.row_facts()
    pairs = set(zip(table.column("doc_id").to_pylist(), table.column("doc_version").to_pylist()))
    stale = sorted(f"{d} v{v}" for d, v in pairs - current)
    return Finding(not stale, f"{len(stale)} document versions in the index are not current", stale[:20])


def index_rows_match_catalog(catalog: Catalog, index: SubchunkIndex) -> Finding:
    """Every row is a current unit's member and carries its document's ACL, offsets inside its member and the text
    it embeds."""
    truth = catalog.index_row_truth()
    facts = index.row_facts().to_pylist()
    bad: list[str] = []
    for row in facts:
        found = truth.get((row["doc_id"], row["doc_version"], row["part"], row["member_start"], row["member_end"]))
        if found is None:  # after the index step every row is a current unit's member
            bad.append(f"{row['doc_id']} v{row['doc_version']} part {row['part']}: not a member of a current unit")
            continue
        acl, title, text = found
        s, e, start, end = row["char_start"], row["char_end"], row["member_start"], row["member_end"]
        if tuple(sorted(row["acl"])) != tuple(sorted(acl)):
            bad.append(f"{row['doc_id']} v{row['doc_version']}: row ACL {row['acl']} but the catalog says {list(acl)}")
        elif not (start <= s < e <= end <= len(text)):
            bad.append(f"{row['doc_id']} v{row['doc_version']}: offsets {s}-{e} outside {start}-{min(end, len(text))}")
        elif row["text_hash"] != content_hash(embedded_text(title, text, s, e)):
            bad.append(f"{row['doc_id']} v{row['doc_version']}: row {s}-{e} was embedded from another text")
    return Finding(not bad, f"{len(bad)} of {len(facts)} index rows disagree with the catalog", bad[:20])
