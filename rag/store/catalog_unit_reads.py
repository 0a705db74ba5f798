"""The catalog's reads of units and their members (part of Catalog): the units a publish touches, so the index step
reads the change, not every unit; what lets a publish that changed nothing keep its units; and the current members
and unit membership a reader's state is built from, as rows or as Arrow columns."""
from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from rag.store.rows import MemberRow
from rag.store.schema import digest_sql, unit_key_sql
from rag.units.long_units import Member, split_unit_key

# Part of the plan inputs: raised when planning makes other units of the same documents, so that no run keeps the
# units of the code before.
PLAN_FORMAT = 1
# A current document's planning fields, hashed: what its units depend on of it.
PLAN_KEY = "hash(doc_id, version, title, content_hash, acl, collection, links)"

def split_keys(unit_keys: list[str]) -> tuple[list[str], list[int]]:
    """'unit_id@version' keys as two parallel lists, for a join instead of a per-row string build."""
    ids, versions = zip(*map(split_unit_key, unit_keys)) if unit_keys else ((), ())
    return list(ids), list(versions)


def _current(alias: str, as_of: datetime | None) -> tuple[str, list]:
    """SQL that keeps the rows (of `units` or `documents`, aliased) current now, or at `as_of`, and its parameters."""
    if as_of is None:
        return f"{alias}.status = 'current'", []
    return f"{alias}.valid_from <= ? AND ({alias}.valid_to IS NULL OR {alias}.valid_to > ?)", [as_of, as_of]


def _units_members(unit_keys: list[str] | None) -> tuple[str, list]:
    """SQL from `units u` (only these unit versions, when given) joined to their members `m`, and its parameters."""
    if unit_keys is None:
        return "units u JOIN unit_members m USING (unit_id, unit_version)", []
    return ("units u JOIN (SELECT unnest(?) AS unit_id, unnest(?)::INTEGER AS unit_version) k "
            "USING (unit_id, unit_version) JOIN unit_members m USING (unit_id, unit_version)", [*split_keys(unit_keys)])


_UNIT_LO, _UNIT_HI = digest_sql([unit_key_sql("u")])
_UNIT_DIGEST = f"{_UNIT_LO} AS unit_lo, {_UNIT_HI} AS unit_hi"


def _members_sql(unit_keys: list[str] | None, as_of: datetime | None, placed: bool = False) -> tuple[str, list]:
    """The members of these unit versions (all current units when None) whose version is current (or was at `as_of`):
    unit key, position, doc_id, doc_version, part, char_start, char_end, tokens, title, acl, content_hash, ordered by
    unit key and position; `placed`: only the unit key, position, doc_id, part, range and tokens, in no order."""
    units, keys = _units_members(unit_keys)
    (doc_ok, doc_params), (unit_ok, unit_params) = _current("d", as_of), _current("u", as_of)
    fields = (f"m.position, m.doc_id, m.part, m.char_start, m.char_end, m.tokens, {_UNIT_DIGEST}" if placed else
              "m.position, m.doc_id, m.doc_version, m.part, m.char_start, m.char_end, m.tokens, d.title, d.acl, "
              "d.content_hash")
    return (f"SELECT {unit_key_sql('u')} AS unit_key, {fields} FROM {units} "
            f"JOIN documents d ON d.doc_id = m.doc_id AND d.version = m.doc_version AND {doc_ok} "
            f"WHERE {unit_ok}" + ("" if placed else " ORDER BY unit_key, m.position"),
            [*keys, *doc_params, *unit_params])


def _membership_sql(unit_keys: list[str] | None, as_of: datetime | None, ranked: bool = False) -> tuple[str, list]:
    """Every member of these unit versions (all current units when None, or those current at `as_of`), whatever
    its document's status; `ranked`: by the publish that made its unit, unit key and position."""
    units, keys = _units_members(unit_keys)
    unit_ok, unit_params = _current("u", as_of)
    return (f"SELECT {unit_key_sql('u')} AS unit_key, m.position, u.publish_id, m.doc_id, m.doc_version, m.part, "
            f"m.char_start AS member_start, m.char_end AS member_end, u.acl, u.collection FROM {units} "
            f"WHERE {unit_ok}" + (" ORDER BY coalesce(u.publish_id, 0), unit_key, m.position" if ranked else ""),
            [*keys, *unit_params])


class UnitReads:
    """Reads of `units` and `unit_members` by status and document; mixed into Catalog (its `rows`, `columns`, `con`,
    `transaction`)."""

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

    def current_members(self, unit_keys: list[str] | None = None, as_of: datetime | None = None) -> list[MemberRow]:
        """Members of these unit versions (all current units when None) if still current, or current at `as_of`.

        The read-time check of rules 1–3: a retired unit, or a member whose version is no longer current,
        yields nothing, whatever the index still holds.
        """
        if unit_keys is not None and not unit_keys:
            return []
        # one object per distinct unit key and ACL: a unit's members repeat its key, and documents share few ACLs
        shared: dict = {}
        return [MemberRow(shared.setdefault(r[0], r[0]), *r[1:9], shared.setdefault(acl := tuple(r[9]), acl), r[10])
                for r in self.rows(*_members_sql(unit_keys, as_of))]

    def current_member_columns(self, unit_keys: list[str] | None = None) -> pa.Table:
        """Where each member of the current units (of these, when given) lies: unit key, position, doc_id, part,
        range, tokens, and the unit key's digest (`unit_lo`, `unit_hi`), as Arrow columns in no order. A read state is
        built from them without a Python object per member, and takes a member's version, title, ACL and hash from
        its document's current version (current_version_columns)."""
        return self.columns(*_members_sql(unit_keys, None, placed=True))

    def units_changed_from(self, last: pa.Table) -> tuple[pa.Table, list[str]]:
        """Against a read state's current units (`last`: their keys' digests `unit_lo`, `unit_hi`): the digests no
        current unit has now, and the keys of the current units whose digest it lacks."""
        found = self.columns_over(
            f"SELECT u.unit_key, l.unit_lo AS last_lo, l.unit_hi AS last_hi FROM (SELECT {unit_key_sql('u')} AS "
            f"unit_key, {_UNIT_DIGEST} FROM units u WHERE u.status = 'current') u FULL JOIN _last l "
            "USING (unit_lo, unit_hi) WHERE u.unit_key IS NULL OR l.unit_lo IS NULL", "_last", last)
        gone = pc.is_null(found.column("unit_key"))
        return (found.filter(gone).select(["last_lo", "last_hi"]).rename_columns(["unit_lo", "unit_hi"]),
                sorted(found.column("unit_key").filter(pc.invert(gone)).to_pylist()))

    def units_holding(self, doc_ids: list[str]) -> list[str]:
        """The keys of the current units with a member of one of these documents (whatever its version)."""
        return [k for (k,) in self.rows(
            f"SELECT DISTINCT {unit_key_sql('u')} FROM units u JOIN unit_members m USING (unit_id, unit_version) "
            "WHERE u.status = 'current' AND m.doc_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY 1", [doc_ids])]

    def unit_membership(self, unit_keys: list[str] | None = None, as_of: datetime | None = None) -> list[tuple]:
        """(unit key, position, publish_id, doc_id, doc_version, part, start, end, unit ACL, collection) of every
        member of these unit versions (all current units when None, or those current at `as_of`), whatever their
        documents' status: what places an index row (keyed by document version) in its unit."""
        if unit_keys is not None and not unit_keys:
            return []
        return self.rows(*_membership_sql(unit_keys, as_of))

    def membership_columns(self, as_of: datetime | None = None) -> pa.Table:
        """unit_membership() of every current unit (or every unit current at `as_of`) as Arrow columns, ranked as
        `Membership` ranks them."""
        return self.columns(*_membership_sql(None, as_of, ranked=True))

    def current_units(self, doc_ids: list[str] | None = None) -> dict[str, tuple[int, str]]:
        """Version and content hash of each current unit (of those holding one of these documents, if given)."""
        holding = "" if doc_ids is None else (
            "AND EXISTS (SELECT 1 FROM unit_members m WHERE m.unit_id = u.unit_id AND m.unit_version = u.unit_version "
            "AND m.doc_id IN (SELECT unnest(?)))")
        return {u: (v, h) for u, v, h in self.rows(
            f"SELECT unit_id, unit_version, content_hash FROM units u WHERE status = 'current' {holding}",
            [] if doc_ids is None else [sorted(doc_ids)])}

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

    def plan_inputs(self, cap: int, derive_links: bool) -> str:
        """What the unit plan is a function of: every current version's planning fields, the cap, derived links."""
        (count, digest), = self.rows(
            f"SELECT count(*), coalesce(bit_xor({PLAN_KEY}), 0) FROM documents WHERE status = 'current'")
        return f"{PLAN_FORMAT}:{cap}:{derive_links}:{count}:{digest}"

    def planned_from(self, publish_id: int) -> str | None:
        """The plan inputs of the last publish before this one that committed its units (their current units)."""
        rows = self.rows("SELECT plan_inputs FROM publish_log WHERE publish_id = (SELECT max(publish_id) "
                         "FROM publish_log WHERE publish_id < ? AND status = 'published')", [publish_id])
        return rows[0][0] if rows else None

    def keep_units(self, publish_id: int, inputs: str) -> None:
        """Stage no unit: the current units are the plan of these inputs (a publish that changed nothing)."""
        with self.transaction():
            self.con.execute("UPDATE units SET status = 'abandoned' WHERE status = 'pending'")
            self.con.execute("UPDATE publish_log SET units_retired = [], plan_inputs = ? WHERE publish_id = ?",
                             [inputs, publish_id])

    def kept_units(self) -> list[tuple[int, int]]:
        """(tokens, members) of each current unit, by unit id."""
        return [(t, n) for _, t, n in self.rows(
            "SELECT u.unit_id, u.tokens, count(*) FROM units u JOIN unit_members m USING (unit_id, unit_version) "
            "WHERE u.status = 'current' GROUP BY ALL ORDER BY 1")]

    def kept_components(self) -> int:
        """Link-connected components kept in `group_members`: a component's signature is on one member's row."""
        (n,), = self.rows("SELECT count(signature) FROM group_members")
        return n

    def missing_links(self) -> list[tuple[str, str]]:
        """(doc id, link) of each link of a current document to no current document's id or title, sorted."""
        return self.rows(
            "WITH d AS (SELECT doc_id, title, links FROM documents WHERE status = 'current'), "
            "l AS (SELECT doc_id, unnest(links) AS link FROM d) "
            "SELECT doc_id, link FROM l WHERE link NOT IN (SELECT doc_id FROM d) "
            "AND link NOT IN (SELECT title FROM d WHERE title IS NOT NULL) ORDER BY 1, 2")
