"""Which unit each sub-chunk row belongs to in one snapshot.

Rows are keyed by document version, member range and the unit's ACL and collection; a snapshot's unit membership
(current, or as of a time) places each row in its unit, so a unit re-grouped around unchanged members needs no new
rows. A table from before (rows keyed by unit version, `UNIT_KEYED`) names its units itself and is read as written.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag.store.arrow_sql import whole
from rag.store.index import KEY_COLUMNS, UNIT_KEYED, MemberKey

SEPARATOR, ACL_SEPARATOR = "\x1f", "\x1e"  # characters no id, version label, group or collection name holds


@dataclass(frozen=True)
class Membership:
    """The members of a snapshot's units, ranked by the publish that made their unit, unit key and position (the
    order a table keyed by unit version held its rows in): each member's key as one string, and its unit key."""

    keys: pa.Array
    unit_keys: np.ndarray

    @classmethod
    def of(cls, rows: list[tuple]) -> "Membership":
        """From `Catalog.unit_membership` rows."""
        ranked = sorted(rows, key=lambda r: (r[2] or 0, r[0], r[1]))
        return cls(pa.array([joined(k) for k in membership_keys(ranked)], pa.string()),
                   np.asarray([r[0] for r in ranked], dtype=object))

    @classmethod
    def of_columns(cls, table: pa.Table) -> "Membership":
        """From `Catalog.membership_columns` (ranked there), each key made in Arrow: no Python object per member."""
        return cls(whole(row_keys(table)),
                   np.asarray(table.column("unit_key").to_numpy(zero_copy_only=False), dtype=object))


def membership_keys(rows: list[tuple]) -> list[MemberKey]:
    """The member key of each `Catalog.unit_membership` row."""
    return [(d, v, part, s, e, tuple(acl), coll) for _, _, _, d, v, part, s, e, acl, coll in rows]


def joined(key: MemberKey) -> str:
    """A member key as the one string `row_keys` makes of a row's."""
    doc_id, version, part, start, end, acl, collection = key
    return SEPARATOR.join([doc_id, version, str(part), str(start), str(end), ACL_SEPARATOR.join(acl),
                           collection or ""])


def row_keys(data: pa.Table) -> pa.Array:
    """Each row's member key as one string, computed in Arrow (no Python object per row)."""
    parts = [pc.binary_join(data.column(c), ACL_SEPARATOR) if c == "acl" else pc.cast(data.column(c), pa.string())
             for c in KEY_COLUMNS]
    return pc.binary_join_element_wise(*parts, SEPARATOR, null_handling="replace", null_replacement="")


def place(data: pa.Table, membership: Membership | None) -> tuple[np.ndarray, np.ndarray]:
    """(rows in serving order, their unit keys) for a table's `row_columns`; rows no unit holds are left out."""
    if UNIT_KEYED in data.schema.names:
        return np.arange(data.num_rows), np.asarray(data.column(UNIT_KEYED).to_pylist(), dtype=object)
    if membership is None:
        raise LookupError("the index's rows are keyed by document version: reading them needs the unit membership")
    if not data.num_rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
    rank = pc.fill_null(pc.index_in(row_keys(data), value_set=membership.keys), -1).to_numpy()
    rows = np.flatnonzero(rank >= 0)
    starts = data.column("char_start").to_numpy()[rows]
    order = rows[np.lexsort((starts, rank[rows]))]
    return order, membership.unit_keys[rank[order]]
