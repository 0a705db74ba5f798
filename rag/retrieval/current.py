"""The current units' members and the current documents' versions and ACLs, as one snapshot has them.

A snapshot's state is read from the catalog once (`CurrentState`: dicts, what a partition's reader keeps and merges),
then turned into arrays (`PublishedState`) that the read-state files hold and every worker maps: the member table,
and per current document (sorted by id) its version, title, ACL, content hash and unit. The mappings a query reads
(members of a unit, a document's version or unit, a title's documents) look codes up in those arrays and make the
rows they return when asked.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np
import pyarrow as pa

from rag.retrieval.members import (
    DocColumns,
    MemberTable,
    acl_numbering,
    first_unit_of,
    linked_share,
    member_table,
    member_table_of,
    rows_by_unit,
    table_arrays,
    table_of,
)
from rag.retrieval.state_files import Arrays
from rag.retrieval.strings import Column, Strings, column_of, rows_by_key, strings_of
from rag.store.arrow_sql import whole
from rag.store.catalog import Catalog
from rag.store.rows import CurrentVersion, MemberRow


@dataclass(frozen=True)
class CurrentState:
    """The state as the catalog gives it: unit key → members in order, doc_id → its unit and its current version."""

    members: dict[str, list[MemberRow]]
    unit_of: dict[str, str]
    versions: dict[str, CurrentVersion]


def current_state(catalog: Catalog) -> CurrentState:
    versions = catalog.current_versions()
    members = rows_by_unit(map(partial(sharing_strings, versions), catalog.current_members()))
    return CurrentState(members, first_unit_of(members), versions)


def sharing_strings(versions: dict[str, CurrentVersion], row: MemberRow) -> MemberRow:
    """The member with its document's strings taken from its current version: one copy per document."""
    v = versions.get(row.doc_id)
    if v is None or v.version != row.doc_version:
        return row
    return MemberRow(row.unit_key, row.position, v.doc_id, v.version, row.part, row.start, row.end, row.tokens,
                     v.title, v.acl, v.content_hash)


def merged_state(states: list[CurrentState], hidden: set[str]) -> CurrentState:
    """The partitions' states as one, without the documents two partitions claim (see rag.store.union_catalog)."""
    members: dict[str, list[MemberRow]] = {}
    unit_of: dict[str, str] = {}
    versions: dict[str, CurrentVersion] = {}
    for state in states:
        for key, rows in state.members.items():
            kept = [r for r in rows if r.doc_id not in hidden]
            if kept:
                members[key] = kept
        unit_of.update((d, u) for d, u in state.unit_of.items() if d not in hidden)
        versions.update((d, v) for d, v in state.versions.items() if d not in hidden)
    return CurrentState(members, unit_of, versions)


@dataclass(frozen=True)
class PublishedState:
    """The state as arrays: the member table, and per current document (`docs`, sorted) its fields."""

    table: MemberTable
    docs: Strings
    versions_of: Column
    titles_of: Column
    hashes: Column
    acl_ids: np.ndarray
    acl_sets: list[tuple[str, ...]]
    units: np.ndarray  # per document, the code (in table.units) of the first unit by key holding it, -1 for none
    # Per document and per unit (of table.units), its catalog row's digest (lo, hi): what the next snapshot's part
    # is compared by (rag.retrieval.current_changes); None for a state merged from partitions.
    doc_digests: np.ndarray | None = None
    unit_digests: np.ndarray | None = None

    # Made on each read, never kept: a kept view of the state would be a reference cycle holding its mapped files
    # open until the cyclic collector ran.
    @property
    def members(self) -> "UnitMembers":
        return UnitMembers(self.table)

    @property
    def unit_of(self) -> "DocUnits":
        return DocUnits(self)

    @property
    def versions(self) -> "Versions":
        return Versions(self)

    def version(self, code: int) -> CurrentVersion:
        return CurrentVersion(self.docs[code], self.versions_of[code], self.titles_of[code],
                              self.acl_sets[int(self.acl_ids[code])], self.hashes[code])

    def content_hash(self, doc_id: str, version: str) -> str | None:
        """The content hash of a current version, for the text cache (None for any other version)."""
        code = self.docs.code(doc_id)
        return self.hashes[code] if code >= 0 and self.versions_of[code] == version else None

    def title(self, doc_id: str, version: str) -> str | None:
        """The title of a current version (None for any other version)."""
        code = self.docs.code(doc_id)
        return self.titles_of[code] if code >= 0 and self.versions_of[code] == version else None

    @property
    def doc_hashes(self) -> tuple[np.ndarray, np.ndarray]:
        """The documents' ids and content hashes, encoded, sorted by id (BM25's pairs of a whole workspace)."""
        return self.docs.table, self.hashes.strings.table[self.hashes.codes]

    @property
    def acls(self) -> "AclOf":
        return AclOf(self)

    def readable(self, doc_ids: list[str], groups: frozenset[str]) -> set[str]:
        """Which of these documents have a current version whose ACL admits one of the groups."""
        codes = self.docs.codes(doc_ids)
        sets = np.fromiter((not groups.isdisjoint(a) for a in self.acl_sets), dtype=bool, count=len(self.acl_sets))
        return {d for d, c in zip(doc_ids, codes.tolist()) if c >= 0 and sets[self.acl_ids[c]]}

    @cached_property
    def link_density(self) -> float:
        """The current units' mean 1/k over linked members (members.linked_share), all members counted: the corpus's
        figure; a query's boost counts the members its caller may read (MemberTable.link_density)."""
        return linked_share(np.diff(self.table.unit_bounds).tolist())

    @cached_property
    def titles(self) -> "TitleDocs":
        """Title → the current documents carrying it, to tell a name that has a document of its own."""
        return TitleDocs(self.docs, rows_by_key(self.titles_of))

    @cached_property
    def unindexed_ids(self) -> frozenset[str]:
        """Documents whose current version no current unit holds yet (between the documents and index steps)."""
        return frozenset(self.docs.decode(np.flatnonzero(self.units < 0)))


class _Lookup(Mapping):
    """A mapping over a sorted string table: `_at(code)` makes the value of the key with that code."""

    keys_table: Strings

    def _at(self, code: int):
        raise NotImplementedError

    def _has(self, code: int) -> bool:
        return code >= 0

    def get(self, key, default=None):
        code = self.keys_table.code(key)
        return self._at(code) if self._has(code) else default

    def __getitem__(self, key):
        code = self.keys_table.code(key)
        if not self._has(code):
            raise KeyError(key)
        return self._at(code)

    def __contains__(self, key) -> bool:
        return self._has(self.keys_table.code(key))

    def __iter__(self):
        return (k for i, k in enumerate(self.keys_table[:]) if self._has(i))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class UnitMembers(_Lookup):
    """Unit key → its members in position order."""

    def __init__(self, table: MemberTable):
        self.table, self.keys_table = table, table.units

    def _at(self, code: int) -> list[MemberRow]:
        return [self.table.row(i) for i in range(int(self.table.unit_bounds[code]), int(self.table.unit_bounds[code + 1]))]

    def __len__(self) -> int:
        return len(self.keys_table)


class DocUnits(_Lookup):
    """doc_id → the first unit by key holding its current version."""

    def __init__(self, state: PublishedState):
        self.state, self.keys_table = state, state.docs

    def _has(self, code: int) -> bool:
        return code >= 0 and self.state.units[code] >= 0

    def _at(self, code: int) -> str:
        return self.state.table.units[int(self.state.units[code])]

    def arrays(self) -> tuple[Strings, Column]:
        """The documents with a unit (sorted) and each one's unit key (rag.retrieval.unit_ranking's input)."""
        held = np.flatnonzero(self.state.units >= 0)
        return Strings(self.state.docs.table[held]), Column(self.state.units[held].astype(np.int32), self.state.table.units)


class Versions(_Lookup):
    """doc_id → its current version."""

    def __init__(self, state: PublishedState):
        self.state, self.keys_table = state, state.docs

    def _at(self, code: int) -> CurrentVersion:
        return self.state.version(code)

    def __len__(self) -> int:
        return len(self.keys_table)


class AclOf(_Lookup):
    """doc_id → its current version's ACL; acl_codes numbers many at once."""

    def __init__(self, state: PublishedState):
        self.state, self.keys_table = state, state.docs

    def _at(self, code: int) -> tuple[str, ...]:
        return self.state.acl_sets[int(self.state.acl_ids[code])]

    def acl_codes(self, doc_ids, sets: dict[frozenset[str], int]) -> np.ndarray:
        """Per document its ACL's number in `sets` (added when new), -1 for one without a current version."""
        remap = np.array([sets.setdefault(frozenset(a), len(sets)) for a in self.state.acl_sets] or [0], np.int32)
        codes = self.keys_table.codes(doc_ids)
        return np.where(codes >= 0, remap[self.state.acl_ids[np.maximum(codes, 0)]], -1).astype(np.int32)


class TitleDocs(_Lookup):
    """Title → the current documents carrying it."""

    def __init__(self, docs: Strings, by_title):
        self.docs, self.by_title, self.keys_table = docs, by_title, by_title.strings

    def _has(self, code: int) -> bool:
        return code >= 0 and self.by_title.bounds[code + 1] > self.by_title.bounds[code]

    def _at(self, code: int) -> list[str]:
        return self.docs.decode(self.by_title.order[self.by_title.bounds[code]:self.by_title.bounds[code + 1]])


def current_arrays(state: CurrentState) -> Arrays:
    """The state as arrays for a read-state file."""
    docs = strings_of(list(state.versions))
    rows = [None] * len(docs)
    for code, v in zip(docs.codes.tolist(), state.versions.values()):
        rows[code] = v
    acl_sets: dict[tuple[str, ...], int] = {}
    acl_ids = np.fromiter((acl_sets.setdefault(tuple(v.acl), len(acl_sets)) for v in rows), np.int32, len(rows))
    columns = {"versions": strings_of([v.version for v in rows]), "titles": strings_of([v.title for v in rows]),
               "hashes": strings_of([v.content_hash for v in rows])}
    table = member_table(state.members, DocColumns(docs.strings, tuple(columns.values()), acl_ids, list(acl_sets)))
    units = np.full(len(rows), -1, dtype=np.int64)
    held, unit = docs.strings.codes(list(state.unit_of)), table.units.codes(list(state.unit_of.values()))
    units[held[held >= 0]] = unit[held >= 0]
    return state_arrays(table, docs.strings, columns, acl_ids, list(acl_sets), units)


def current_arrays_of(members: pa.Table, versions: pa.Table) -> Arrays:
    """current_arrays of the catalog's current members and versions as Arrow columns
    (`Catalog.current_member_columns`, `Catalog.current_version_columns`), without a Python object per row, with
    their digests."""
    docs = column_of(versions.column("doc_id"))  # one row per document: the codes are a permutation
    rows = versions.take(pa.array(np.argsort(docs.codes)))
    acl_ids, acl_sets = acl_numbering(rows.column("acl"))
    columns = {name: column_of(rows.column(c)) for name, c in
               (("versions", "version"), ("titles", "title"), ("hashes", "content_hash"))}
    table, order = member_table_of(members, whole(rows.column("doc_id")),
                                   DocColumns(docs.strings, tuple(columns.values()), acl_ids, acl_sets))
    first = members.select(["unit_lo", "unit_hi"]).take(pa.array(order[table.unit_bounds[:-1]]))  # one row a unit
    digests = {"doc_digests": digests_of(rows, "digest"), "unit_digests": digests_of(first, "unit")}
    return state_arrays(table, docs.strings, columns, acl_ids, acl_sets, doc_units(table, len(docs.strings)), digests)


def digests_of(rows: pa.Table, name: str) -> np.ndarray:
    """The rows' digests (`{name}_lo`, `{name}_hi` columns) as one (rows, 2) array."""
    return np.stack([rows.column(f"{name}_{half}").to_numpy() for half in ("lo", "hi")], axis=1).astype(np.uint64)


def doc_units(table: MemberTable, documents: int) -> np.ndarray:
    """Per document, the first unit by key holding it (the lowest unit code among its members' rows), -1 for none."""
    units = np.full(documents, len(table.units), dtype=np.int64)
    np.minimum.at(units, table.doc_ids.codes, table.unit_rank)
    units[units == len(table.units)] = -1
    return units


def state_arrays(table: MemberTable, docs: Strings, columns: dict[str, Column], acl_ids: np.ndarray,
                 acl_sets: list[tuple[str, ...]], units: np.ndarray, digests: dict[str, np.ndarray] | None = None
                 ) -> Arrays:
    """The state's arrays for a read-state file; the member table's string tables are the documents' (held once)."""
    arrays = table_arrays(table, "members.", strings=False) | {"docs": docs.table, "acl_ids": acl_ids, "units": units}
    for name, column in columns.items():
        arrays |= {f"{name}.codes": column.codes, f"{name}.strings": column.strings.table}
    return Arrays(arrays | (digests or {}),
                  {"member_acls": [list(a) for a in table.acl_sets], "acls": [list(a) for a in acl_sets]})


def published_state(found: Arrays) -> PublishedState:
    """The state of current_arrays' arrays (mapped from a file: no copy is made)."""
    column = {n: Column(found[f"{n}.codes"], Strings(found[f"{n}.strings"])) for n in ("versions", "titles", "hashes")}
    docs = Strings(found["docs"])
    table = table_of(found.arrays, found.meta["member_acls"], "members.",
                     {"doc_ids": docs, **{n: c.strings for n, c in column.items()}})
    return PublishedState(table, docs, column["versions"], column["titles"], column["hashes"], found["acl_ids"],
                          [tuple(a) for a in found.meta["acls"]], found["units"], found.arrays.get("doc_digests"),
                          found.arrays.get("unit_digests"))
