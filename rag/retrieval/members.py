"""Unit members as arrays: a LongRAG hop scores, filters and orders its candidate members with numpy.

The current snapshot's table is written once and mapped by every worker (rag.retrieval.state_files); an as-of read
builds one from the members the catalog returns for that point in time. Rows are grouped by unit key in sorted
order, and by position within a unit, as `Snapshot.members` returns them; a row's MemberRow or Candidate fields are
made when read.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag.retrieval.context import Candidate
from rag.retrieval.ivf import concatenated_ranges
from rag.retrieval.row_mask import RowMask, remember, row_mask
from rag.retrieval.strings import Column, Strings, column_of, encoded, strings_of
from rag.store.arrow_sql import whole
from rag.store.row_units import ACL_SEPARATOR
from rag.store.rows import MemberRow


@dataclass
class MemberTable:
    """Members as arrays (mapped from the snapshot's read-state files, or built for a past state): rows grouped by
    unit key in sorted order, by position within a unit; a row's strings are codes into tables
    (rag.retrieval.strings)."""

    units: Strings                             # sorted unit keys: a row's unit code is the key's rank
    unit_bounds: np.ndarray                    # unit code → its rows' slice [bounds[u], bounds[u + 1])
    unit_rank: np.ndarray                      # per row, its unit code
    position: np.ndarray
    doc_ids: Column
    versions: Column
    titles: Column
    hashes: Column
    parts: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    tokens: np.ndarray                         # of the row's rendered block
    acl_ids: np.ndarray                        # index into acl_sets
    acl_sets: list[tuple[str, ...]]
    entry_codes: np.ndarray                    # one number per (doc_id, doc_version, ranges): packing's identity
    keys: np.ndarray                           # sorted (unit code, doc code, part) of every row, packed
    key_rows: np.ndarray                       # per packed key, its row
    _masks: dict = field(default_factory=dict, repr=False)
    _densities: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __len__(self) -> int:
        return len(self.unit_rank)

    @property
    def doc_codes(self) -> np.ndarray:
        """One number per doc_id."""
        return self.doc_ids.codes

    @cached_property
    def doc_code_of(self) -> Codes:
        return Codes(self.doc_ids.strings)

    # Made on each read, never kept on the table: a kept one would be a reference cycle, and a table whose arrays
    # are mapped would hold its files open until the cyclic collector ran.
    @property
    def rows(self) -> "LazyRows":
        """Row i as a MemberRow, built when read."""
        return LazyRows(len(self), self.row)

    @property
    def heads(self) -> "LazyRows":
        """A row's Candidate fields before the score."""
        return LazyRows(len(self), self.head)

    @property
    def tails(self) -> "LazyRows":
        """And after it."""
        return LazyRows(len(self), self.tail)

    def head(self, i: int) -> tuple:
        return (self.doc_ids[i], self.versions[i], self.titles[i], "", int(self.tokens[i]),
                ((int(self.starts[i]), int(self.ends[i])),))

    def tail(self, i: int) -> tuple:
        return self.units[int(self.unit_rank[i])], None, int(self.parts[i])

    def row(self, i: int) -> MemberRow:
        return MemberRow(self.units[int(self.unit_rank[i])], int(self.position[i]), self.doc_ids[i], self.versions[i],
                         int(self.parts[i]), int(self.starts[i]), int(self.ends[i]), int(self.tokens[i]),
                         self.titles[i], self.acl_sets[int(self.acl_ids[i])], self.hashes[i])

    def of_units(self, unit_keys: list[str]) -> np.ndarray:
        """Rows of these units, units in key order (each once), positions in order."""
        codes = self.units.codes(sorted(set(unit_keys)))
        codes = codes[codes >= 0]
        return concatenated_ranges(self.unit_bounds[codes], self.unit_bounds[codes + 1])

    def rows_of(self, units: np.ndarray, docs: np.ndarray, parts: np.ndarray) -> np.ndarray:
        """The row of each (unit code, doc code, part), -1 where the table has none (or a code is -1)."""
        packed = member_keys(units, docs, parts, len(self.doc_ids.strings))
        if not len(self.keys):
            return np.full(len(packed), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.keys, packed), len(self.keys) - 1)
        found = (self.keys[at] == packed) & (units >= 0) & (docs >= 0) & (parts >= 0) & (parts < PART_SPAN)
        return np.where(found, self.key_rows[at], -1)

    def readable(self, groups: frozenset[str]) -> RowMask:
        """Rows whose member ACL admits one of the groups (rule 1's read-time check), indexed like a boolean mask;
        what is kept per group set is its readable ACL sets, nothing as long as the table."""
        return row_mask(self._masks, self._lock, self.acl_sets, self.acl_ids, groups)

    def link_density(self, groups: frozenset[str]) -> float:
        """The units' mean 1/k over linked members (linked_share), counting the members these groups may read: the
        link boost a caller gets follows the units as the caller sees them, not members it may not read."""
        found = self._densities.get(groups)
        if found is None:
            sizes = np.bincount(self.unit_rank[np.asarray(self.readable(groups))], minlength=len(self.units))
            found = remember(self._densities, self._lock, groups, linked_share(sizes.tolist()))
        return found


@dataclass(frozen=True)
class Codes:
    """A string table's code lookup as a mapping's `get` (None for a string it lacks)."""

    strings: Strings

    def get(self, key, default=None):
        code = self.strings.code(key)
        return default if code < 0 else code


@dataclass(frozen=True)
class LazyRows(Sequence):
    """A sequence whose items are made when read."""

    size: int
    make: Callable[[int], object]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.make(j) for j in range(*i.indices(self.size))]
        if not -self.size <= i < self.size:
            raise IndexError(i)
        return self.make(i % self.size)


PART_SPAN = 1 << 12  # a member's part (its place in a document split across units) is far below this


def member_keys(units: np.ndarray, docs: np.ndarray, parts: np.ndarray, documents: int) -> np.ndarray:
    """(unit code, doc code, part) packed into one integer each."""
    return (units.astype(np.int64) * documents + docs) * PART_SPAN + parts


STRING_FIELDS = ("doc_id", "doc_version", "title", "content_hash")  # a MemberRow's, and the catalog's columns
INT_COLUMNS = {"position": "position", "part": "part", "start": "char_start", "end": "char_end", "tokens": "tokens"}


def member_table(members: Mapping[str, list[MemberRow]], docs: DocColumns | None = None) -> MemberTable:
    """The table of unit key → members in position order; over the current documents' columns when given (the
    members are then current versions, as member_table_of's)."""
    keys = sorted(members)
    rows = [r for key in keys for r in members[key]]
    counts = np.fromiter((len(members[k]) for k in keys), dtype=np.int64, count=len(keys))
    ints = {name: np.fromiter((getattr(r, name) for r in rows), dtype=np.int64, count=len(rows))
            for name in ("position", "part", "start", "end", "tokens")}
    if docs is not None:
        doc = docs.table.codes([r.doc_id for r in rows])
        strings = [Column(doc.astype(np.int32), docs.table), *(c.take(doc) for c in docs.columns)]
        acls = renumbered(docs.acl_ids[doc], docs.acl_sets)
        return table_of_columns(Strings(encoded(keys)), counts, strings, ints, *acls)
    acl_sets: dict[tuple[str, ...], int] = {}
    acl_ids = np.fromiter((acl_sets.setdefault(tuple(r.acl), len(acl_sets)) for r in rows), dtype=np.int32,
                          count=len(rows))
    strings = [strings_of([getattr(r, name) for r in rows]) for name in STRING_FIELDS]
    return table_of_columns(Strings(encoded(keys)), counts, strings, ints, acl_ids, list(acl_sets))


def member_table_of(rows: pa.Table, doc_ids: pa.Array, docs: DocColumns) -> tuple[MemberTable, np.ndarray]:
    """member_table of `Catalog.current_member_columns`' rows, made column by column (no Python object per member),
    over the current documents' columns (`doc_ids`: their ids as Arrow strings, in code order): a current member is
    its document's current version, so its strings and ACL are its document's and only the document's code is looked
    up. With the table, the input row of each of its rows."""
    units = column_of(rows.column("unit_key"))
    order = np.lexsort((rows.column("position").to_numpy(), units.codes))
    rows = rows.take(pa.array(order))
    counts = np.bincount(units.codes[order], minlength=len(units.strings)).astype(np.int64)
    ints = {name: rows.column(column).to_numpy().astype(np.int64) for name, column in INT_COLUMNS.items()}
    doc = pc.index_in(rows.column("doc_id"), value_set=doc_ids).to_numpy(zero_copy_only=False).astype(np.int64)
    strings = [Column(doc.astype(np.int32), docs.table), *(c.take(doc) for c in docs.columns)]
    return table_of_columns(units.strings, counts, strings, ints, *renumbered(docs.acl_ids[doc], docs.acl_sets)), order


@dataclass(frozen=True)
class DocColumns:
    """The current documents sorted by id: their table, and per document its version, title and content hash (codes
    into tables) and its ACL's number."""

    table: Strings
    columns: tuple[Column, Column, Column]
    acl_ids: np.ndarray
    acl_sets: list[tuple[str, ...]]


def renumbered(ids: np.ndarray, sets: list[tuple[str, ...]]) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """Numbers into `sets` renumbered in order of first appearance (acl_numbering's order), with the sets they use."""
    used, first = np.unique(ids, return_index=True)
    order = used[np.argsort(first)]
    remap = np.zeros(max(len(sets), 1), dtype=np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return remap[ids], [sets[i] for i in order.tolist()]


def acl_numbering(acls: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    """Per row its ACL's number, ACLs numbered in order of first appearance, and the ACLs in that order."""
    # Joined, an ACL is one string: a group name holds no control character and is never empty (rag.sources.records)
    found = pc.dictionary_encode(pc.binary_join(whole(acls), ACL_SEPARATOR))
    sets = [tuple(a.split(ACL_SEPARATOR)) if a else () for a in found.dictionary.to_pylist()]
    return found.indices.to_numpy().astype(np.int32), sets


def table_of_columns(units: Strings, counts: np.ndarray, strings: list[Column], ints: dict[str, np.ndarray],
                     acl_ids: np.ndarray, acl_sets: list[tuple[str, ...]]) -> MemberTable:
    """A member table of its rows' columns (rows grouped by unit in key order, by position within one)."""
    doc_ids, versions, titles, hashes = strings
    bounds = np.zeros(len(units) + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    unit_rank = np.repeat(np.arange(len(units), dtype=np.int64), counts)
    if len(units) * len(doc_ids.strings) * PART_SPAN >= 2**63:
        raise ValueError(f"{len(units)} units of {len(doc_ids.strings)} documents are too many to key in 64 bits")
    packed = member_keys(unit_rank, doc_ids.codes, ints["part"], len(doc_ids.strings))
    order = np.argsort(packed, kind="stable")
    entries = np.stack([doc_ids.codes, versions.codes, ints["start"], ints["end"]], axis=1)
    return MemberTable(units, bounds, unit_rank, ints["position"], doc_ids, versions, titles, hashes, ints["part"],
                       ints["start"], ints["end"], ints["tokens"], acl_ids, acl_sets, first_seen_rows(entries),
                       packed[order], order)


def first_seen_rows(rows: np.ndarray) -> np.ndarray:
    """One number per distinct row of a 2-d array, in order of first appearance."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    # A stable sort by every column (np.unique over rows compares them as bytes: several times slower at 1M rows).
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    starts = np.ones(len(rows), dtype=bool)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    group = np.cumsum(starts) - 1
    first = order[starts]  # the stable sort puts each distinct row's first appearance first
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    out = np.empty(len(rows), dtype=np.int64)
    out[order] = rank[group]
    return out


COLUMNS = ("doc_ids", "versions", "titles", "hashes")
NUMBERS = ("unit_bounds", "unit_rank", "position", "parts", "starts", "ends", "tokens", "acl_ids", "entry_codes",
           "keys", "key_rows")


def table_arrays(table: MemberTable, prefix: str = "", strings: bool = True) -> dict[str, np.ndarray]:
    """The table as arrays for a read-state file (its ACLs go in the file's meta); without its columns' string
    tables when the file holds them elsewhere (a current table's are its documents')."""
    out = {f"{prefix}units": table.units.table} | {f"{prefix}{n}": getattr(table, n) for n in NUMBERS}
    for name in COLUMNS:
        column = getattr(table, name)
        out |= {f"{prefix}{name}.codes": column.codes} | ({f"{prefix}{name}.strings": column.strings.table}
                                                          if strings else {})
    return out


def table_of(arrays: Mapping[str, np.ndarray], acl_sets: list, prefix: str = "",
             strings: Mapping[str, Strings] | None = None) -> MemberTable:
    """The table of table_arrays' arrays (its columns' string tables from `strings` when given)."""
    strings = strings or {n: Strings(arrays[f"{prefix}{n}.strings"]) for n in COLUMNS}
    columns = {n: Column(arrays[f"{prefix}{n}.codes"], strings[n]) for n in COLUMNS}
    return MemberTable(units=Strings(arrays[f"{prefix}units"]), acl_sets=[tuple(a) for a in acl_sets],
                       **{n: arrays[f"{prefix}{n}"] for n in NUMBERS}, **columns)


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
