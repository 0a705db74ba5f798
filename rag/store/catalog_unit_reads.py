"""The catalog's reads of the units a publish touches, so the index step reads the change, not every unit (part of
Catalog)."""
from __future__ import annotations

from rag.store.schema import unit_key_sql
from rag.units.long_units import Member


class UnitReads:
    """Reads of `units` and `unit_members` by status and document; mixed into Catalog (its `rows`)."""

    def live_units(self, doc_ids: list[str] | None = None, statuses: tuple[str, ...] = ("current", "pending")
                   ) -> dict[str, list[tuple]]:
        """Units that must have rows in the index (current and pending), with their members (only the members of
        these documents, if given)."""
        docs = "" if doc_ids is None else "AND m.doc_id IN (SELECT unnest(?)) "
        rows = self.rows(
            f"SELECT {unit_key_sql('u')}, u.acl, u.collection, m.doc_id, m.doc_version, m.part, "
            "m.char_start, m.char_end, m.tokens FROM units u JOIN unit_members m USING (unit_id, unit_version) "
            f"WHERE u.status IN (SELECT unnest(?)) {docs}ORDER BY 1, m.position",
            [list(statuses), *([sorted(doc_ids)] if doc_ids is not None else [])])
        out: dict[str, list[tuple]] = {}
        for key, acl, coll, *member in rows:
            out.setdefault(key, []).append((tuple(acl), coll, Member(*member)))
        return out

    def leaving_documents(self, publish_id: int) -> set[str]:
        """The documents of the units this running publish retires and of abandoned units whose members are
        still kept (abandoned since the last publish point): the rows the index may hold for no unit."""
        return {d for (d,) in self.rows(
            "SELECT DISTINCT m.doc_id FROM unit_members m JOIN units u USING (unit_id, unit_version) "
            "LEFT JOIN (SELECT unnest(units_retired) AS k FROM publish_log WHERE publish_id = ?) r "
            f"ON r.k = {unit_key_sql('u')} WHERE u.status = 'abandoned' OR r.k IS NOT NULL", [publish_id])}

    def synced_lance_version(self, publish_id: int) -> int | None:
        """The index version the publish before this one left, if its index step brought every row to its units
        (None when a run since stopped halfway, or it never did)."""
        rows = self.rows("SELECT lance_version FROM publish_log WHERE publish_id < ? AND index_synced "
                         "AND publish_id = (SELECT max(publish_id) FROM publish_log WHERE publish_id < ?)",
                         [publish_id, publish_id])
        return rows[0][0] if rows else None
