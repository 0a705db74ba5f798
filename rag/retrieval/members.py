"""Unit members as arrays: a LongRAG hop scores, filters and orders its candidate members with numpy.

The current snapshot's table is built once (members never change within a snapshot); an as-of read builds one
from the members the catalog returns for that point in time. Rows are grouped by unit key in sorted order, and
by position within a unit, as `Snapshot.members` returns them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from rag.retrieval.vectors import acl_mask
from rag.store.rows import MemberRow


@dataclass
class MemberTable:
    rows: list[MemberRow]
    bounds: dict[str, tuple[int, int]]         # unit key → its rows' slice
    index: dict[tuple[str, str, int], int]     # (unit key, doc_id, part) → row
    unit_rank: np.ndarray                      # the unit key's rank in sorted order, per row
    position: np.ndarray
    doc_ids: np.ndarray                        # object array of str
    acl_ids: np.ndarray                        # index into acl_sets
    acl_sets: list[frozenset[str]]
    heads: list[tuple]                         # a row's Candidate fields before the score
    tails: list[tuple]                         # and after it
    _masks: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def of_units(self, unit_keys: list[str]) -> np.ndarray:
        """Rows of these units, units in key order (each once), positions in order."""
        spans = [self.bounds[k] for k in sorted(set(unit_keys)) if k in self.bounds]
        if not spans:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.arange(lo, hi) for lo, hi in spans])

    def readable(self, groups: frozenset[str]) -> np.ndarray:
        """Rows whose member ACL admits one of the groups (rule 1's read-time check), once per group set."""
        return acl_mask(self._masks, self._lock, self.acl_sets, self.acl_ids, groups)


def member_table(members: dict[str, list[MemberRow]]) -> MemberTable:
    """The table of unit key → members in position order."""
    rows: list[MemberRow] = []
    bounds: dict[str, tuple[int, int]] = {}
    ranks: list[int] = []
    for rank, key in enumerate(sorted(members)):
        bounds[key] = (len(rows), len(rows) + len(members[key]))
        rows += members[key]
        ranks += [rank] * len(members[key])
    acl_sets: dict[frozenset[str], int] = {}
    acl_ids = np.fromiter((acl_sets.setdefault(frozenset(r.acl), len(acl_sets)) for r in rows), dtype=np.int32,
                          count=len(rows))
    return MemberTable(rows, bounds, {(r.unit_key, r.doc_id, r.part): i for i, r in enumerate(rows)},
                       np.asarray(ranks, dtype=np.int64), np.asarray([r.position for r in rows], dtype=np.int64),
                       np.asarray([r.doc_id for r in rows], dtype=object), acl_ids, list(acl_sets),
                       [(r.doc_id, r.doc_version, r.title, "", r.tokens, ((r.start, r.end),)) for r in rows],
                       [(r.unit_key, None, r.part) for r in rows])


def rows_by_unit(rows: list[MemberRow]) -> dict[str, list[MemberRow]]:
    out: dict[str, list[MemberRow]] = {}
    for row in rows:
        out.setdefault(row.unit_key, []).append(row)
    return out
