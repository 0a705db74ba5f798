"""Unit members as arrays: a LongRAG hop scores, filters and orders its candidate members with numpy.

The current snapshot's table is built once (members never change within a snapshot); an as-of read builds one
from the members the catalog returns for that point in time. Rows are grouped by unit key in sorted order, and
by position within a unit, as `Snapshot.members` returns them.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rag.retrieval.context import Candidate
from rag.retrieval.vectors import acl_mask, concatenated_ranges, first_seen_codes, remember
from rag.store.rows import MemberRow


@dataclass
class MemberTable:
    rows: list[MemberRow]
    bounds: dict[str, tuple[int, int]]         # unit key → its rows' slice
    index: dict[tuple[str, str, int], int]     # (unit key, doc_id, part) → row
    unit_rank: np.ndarray                      # the unit key's rank in sorted order, per row
    position: np.ndarray
    acl_ids: np.ndarray                        # index into acl_sets
    acl_sets: list[frozenset[str]]
    heads: list[tuple]                         # a row's Candidate fields before the score
    tails: list[tuple]                         # and after it
    tokens: np.ndarray                         # of the row's rendered block
    entry_codes: np.ndarray                    # one number per (doc_id, doc_version, ranges): packing's identity
    doc_codes: np.ndarray                      # one number per doc_id
    doc_code_of: dict[str, int]
    _masks: dict = field(default_factory=dict, repr=False)
    _densities: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def of_units(self, unit_keys: list[str]) -> np.ndarray:
        """Rows of these units, units in key order (each once), positions in order."""
        spans = [self.bounds[k] for k in sorted(set(unit_keys)) if k in self.bounds]
        lo, hi = np.array(spans, dtype=np.int64).reshape(-1, 2).T
        return concatenated_ranges(lo, hi)

    def readable(self, groups: frozenset[str]) -> np.ndarray:
        """Rows whose member ACL admits one of the groups (rule 1's read-time check), once per group set."""
        return acl_mask(self._masks, self._lock, self.acl_sets, self.acl_ids, groups)

    def link_density(self, groups: frozenset[str]) -> float:
        """The units' mean 1/k over linked members (linked_share), counting the members these groups may read: the
        link boost a caller gets follows the units as the caller sees them, not members it may not read."""
        found = self._densities.get(groups)
        if found is None:
            sizes = np.bincount(self.unit_rank[self.readable(groups)], minlength=len(self.bounds))
            found = remember(self._densities, self._lock, groups, linked_share(sizes.tolist()))
        return found


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
    heads = [(r.doc_id, r.doc_version, r.title, "", r.tokens, ((r.start, r.end),)) for r in rows]
    entries: dict[tuple, int] = {}
    docs: dict[str, int] = {}
    return MemberTable(rows, bounds, {(r.unit_key, r.doc_id, r.part): i for i, r in enumerate(rows)},
                       np.asarray(ranks, dtype=np.int64), np.asarray([r.position for r in rows], dtype=np.int64),
                       acl_ids, list(acl_sets), heads,
                       [(r.unit_key, None, r.part) for r in rows], np.asarray([r.tokens for r in rows], dtype=np.int64),
                       first_seen_codes(entries, ((h[0], h[1], h[5]) for h in heads), len(rows)),
                       first_seen_codes(docs, (r.doc_id for r in rows), len(rows)), docs)


@dataclass(frozen=True)
class RankedRows(Sequence):
    """Rows of a member table in ranked order with their scores: a Candidate is built only for an entry read, and
    a ranking reads a few of its hundreds (the seeds of the next hop, the packed ones)."""

    table: MemberTable
    rows: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        row, t = int(self.rows[i]), self.table
        return tuple.__new__(Candidate, t.heads[row] + (round(float(self.scores[i]), 6),) + t.tails[row])

    def __iter__(self):
        heads, tails, new = self.table.heads, self.table.tails, tuple.__new__  # a tuple's own constructor: faster
        return (new(Candidate, heads[r] + (round(s, 6),) + tails[r])
                for r, s in zip(self.rows.tolist(), self.scores.tolist()))

    def without_docs(self, doc_ids: set[str]) -> "RankedRows":
        docs, keep = self.table.doc_codes[self.rows], np.ones(len(self.rows), dtype=bool)
        for code in (c for d in doc_ids if (c := self.table.doc_code_of.get(d)) is not None):  # a hop's few seeds
            keep &= docs != code
        return RankedRows(self.table, self.rows[keep], self.scores[keep])

    def packed(self, budget: int) -> list[Candidate]:
        """context.pack's contract (rank order, an entry that does not fit is skipped, each entry once), read from the
        table's token counts; stops once no later entry can fit."""
        tokens = self.table.tokens[self.rows]
        smallest_left = np.minimum.accumulate(tokens[::-1])[::-1].tolist()
        taken, used, seen = [], 0, set()
        for i, (n, code) in enumerate(zip(tokens.tolist(), self.table.entry_codes[self.rows].tolist())):
            if budget - used < smallest_left[i]:
                break
            if code in seen or used + n > budget:
                continue
            taken.append(i)
            seen.add(code)
            used += n
        return [self[i] for i in taken]


def first_unit_of(members: dict[str, list[MemberRow]]) -> dict[str, str]:
    """Document id → the first key by sort order of the units holding it (its unit for the BM25 channel)."""
    unit_of: dict[str, str] = {}
    for key, rows in members.items():
        for row in rows:
            if row.doc_id not in unit_of or key < unit_of[row.doc_id]:
                unit_of[row.doc_id] = key
    return unit_of


def rows_by_unit(rows: Iterable[MemberRow]) -> dict[str, list[MemberRow]]:
    """Unit key → its rows, in the order given."""
    out: dict[str, list[MemberRow]] = {}
    for row in rows:
        out.setdefault(row.unit_key, []).append(row)
    return out


def linked_share(sizes: Iterable[int]) -> float:
    """1/k averaged over the members of units of k >= 2 members: the share of a unit's best score each member gets
    when it is divided evenly, for a typical linked document of the corpus (0 when nothing is linked)."""
    linked = [k for k in sizes if k > 1]
    return len(linked) / sum(linked) if linked else 0.0
