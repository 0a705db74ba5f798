"""One published state of a workspace, read-only: the catalog snapshot, the index at its version, its read state.

A snapshot file never changes, so everything read from it is built once for the snapshot's life: the current
members and ACLs, the serving vectors, unit codes and BM25 (WARM_PARTS), as arrays, so that per-query permission
and version checks are array look-ups instead of DuckDB scans. A workspace's reader writes each part to files the
first time it is built (rag.retrieval.state_files), and every other worker of the host maps those files instead of
building its own copy. Building a part reuses what the last snapshot this process served holds (the vectors of
unchanged units, the token ids of unchanged texts), mapped or not. Document texts are keyed by content hash and
shared across snapshots (a version's text never changes), so a new publish re-reads only new texts.
"""
from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property, partial
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np
import pyarrow as pa

from rag.models.embedders import workspace_embedder_name
from rag.retrieval.current import (
    CurrentState,
    PublishedState,
    current_arrays,
    current_arrays_of,
    current_state,
    merged_state,
    published_state,
    sharing_strings,
)
from rag.retrieval.current_changes import next_current_arrays
from rag.retrieval.heap import built, release_free_memory
from rag.retrieval.ivf import ann_min_rows, ready, share_lists
from rag.retrieval.lexical import LexicalIndex, lexical_arrays, lexical_index, lexical_of
from rag.retrieval.lexical_past import past_lexical
from rag.retrieval.members import MemberTable, rows_by_unit
from rag.retrieval.past_units import StateUnits, code_rows, kept_last, past_units, per_state
from rag.retrieval.state_files import Arrays, StateFiles, snapshot_key
from rag.retrieval.unit_ranking import UnitCodes, unit_code_arrays, unit_codes, unit_codes_of
from rag.retrieval.vectors import VectorState, load_state, union, vector_arrays, vector_state
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.index_union import IndexUnion
from rag.store.row_units import Membership, place
from rag.store.rows import CurrentVersion, MemberRow
from rag.store.snapshot_files import SnapshotInfo
from rag.store.union_catalog import UnionCatalog

T = TypeVar("T")
# What a query reads, each built once per snapshot (and written to files for the host), in the order they depend on
# one another.
WARM_PARTS = ("current", "member_table", "vectors", "code_rows", "unit_codes", "lexical", "lookups")


@dataclass
class SharedCache:
    """What one workspace's snapshots may share: texts by content hash, sub-chunk rows by unit version, each
    partition's current state by its snapshot, the last current part, vectors and BM25 built or mapped (what the
    next snapshot's build starts from), and the folder the read states' files go to.

    All are immutable for their key: a version's text never changes, a unit version's members never change (and
    with them the rows its members hold), and a partition's snapshot file is never rewritten.
    """

    texts: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)
    units: dict[str, "UnitRows"] = field(default_factory=dict)
    states: dict[str, tuple[int, "CurrentState"]] = field(default_factory=dict)  # partition → (snapshot seq, state)
    vectors: dict[str, tuple[int, VectorState]] = field(default_factory=dict)  # index URI → (table version, rows)
    past: dict[tuple[str, int], VectorState] = field(default_factory=dict)  # (index URI, past version) → rows
    past_codes: dict[tuple[int, datetime], tuple[weakref.ref, StateUnits]] = field(default_factory=dict)  # per_state's
    lexical: LexicalIndex | None = None  # the last snapshot's BM25, what the next one reuses
    current: PublishedState | None = None  # the last snapshot's current part, what the next one is made from
    files: Path | None = None  # where the snapshots' read states are written and mapped (None: kept in memory)

    def keep_current(self, state: PublishedState) -> None:
        """Forget the texts and sub-chunk rows of versions `state` does not hold: kept, those of every version a
        long-lived server had read stayed, a little more memory with each publish. Rebound, not cleared: a read on
        the snapshot still served keeps the dict it holds (a past version is read again on need)."""
        self.texts = {k: v for k, v in self.texts.copy().items() if state.content_hash(k[0], k[1]) == k[2]}
        self.units = {k: v for k, v in self.units.copy().items() if k in state.members}


@dataclass(frozen=True)
class UnitRows:
    """The sub-chunks of one unit version: where each lies, who may read it, its unit-length vector."""

    doc_ids: list[str]
    parts: list[int]
    starts: list[int]
    ends: list[int]
    acls: list[frozenset[str]]
    vectors: np.ndarray


def _keep_unit_rows(cache: dict[str, UnitRows], table: pa.Table, vectors: np.ndarray, keys: np.ndarray) -> None:
    """Group placed rows by unit version into the cache, their vectors scaled to unit length."""
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    cols = {c: table.column(c).to_pylist() for c in ("doc_id", "part", "char_start", "char_end", "acl")}
    rows: dict[str, list[int]] = {}
    for i, key in enumerate(keys.tolist()):
        rows.setdefault(key, []).append(i)
    for key, idx in rows.items():
        cache[key] = UnitRows([cols["doc_id"][i] for i in idx], [cols["part"][i] for i in idx],
                              [cols["char_start"][i] for i in idx], [cols["char_end"][i] for i in idx],
                              [frozenset(cols["acl"][i]) for i in idx], vectors[idx])


class Snapshot:
    """`parts` maps each partition key to its published snapshot ("" alone for an unpartitioned workspace)."""

    def __init__(self, parts: dict[str, SnapshotInfo], catalog: Catalog, index: SubchunkIndex | IndexUnion,
                 shared: SharedCache):
        self.parts, self.catalog, self.index, self._shared = parts, catalog, index, shared
        self._past_lexical: dict[tuple[int, datetime], tuple[weakref.ref, LexicalIndex]] = {}  # as past_codes
        self._moments: dict[datetime, datetime] = {}  # the last few times as-of reads asked → moment_at's
        self._indexes_at: dict[datetime, SubchunkIndex | IndexUnion] = {}  # by moment

    @property
    def info(self) -> SnapshotInfo:
        """The one snapshot of an unpartitioned workspace."""
        if list(self.parts) != [""]:
            raise LookupError("a partitioned workspace has one snapshot per partition: see `parts`")
        return self.parts[""]

    @property
    def label(self) -> str:
        if list(self.parts) == [""]:
            return f"snapshot {self.parts[''].seq}"
        return f"{len(self.parts)} partitions (" + ", ".join(f"{k}: {i.seq}" for k, i in self.parts.items()) + ")"

    @cached_property
    def published(self) -> Mapping[str, CurrentVersion]:
        """doc_id → its current version and ACL, what a query may return: from the read state when its files are
        written, else one catalog read, before the members."""
        if isinstance(self.catalog, UnionCatalog) or (self._files is not None and self._files.has("current")):
            return self.current.versions  # without the documents two partitions claim
        return self.catalog.current_versions()

    @cached_property
    def current(self) -> PublishedState:
        state = self._part("current", self._current_arrays, published_state)
        self._shared.keep_current(state)
        if not isinstance(self.catalog, UnionCatalog):  # what the next snapshot's part is made from
            self._shared.current = state
        return state

    def _current_arrays(self) -> Arrays:
        if isinstance(self.catalog, UnionCatalog):
            return current_arrays(self._current_state())
        last = self._shared.current
        found = next_current_arrays(last, self.catalog) if last is not None else None
        if found is None:
            return current_arrays_of(self.catalog.current_member_columns(), self.catalog.current_version_columns())
        return found

    def _current_state(self) -> CurrentState:
        # A partition's snapshot never changes, so its state is read once per process; only changed ones are.
        states = []
        for key, info in self.parts.items():
            seq, state = self._shared.states.get(key, (None, None))
            if seq != info.seq:
                with self._part_catalog(key) as part:
                    state = current_state(part)
                self._shared.states[key] = (info.seq, state)
            states.append(state)
        return merged_state(states, set(self.catalog.hidden_ids()))

    def members(self, unit_keys: list[str], as_of: datetime | None = None) -> list[MemberRow]:
        """Members of these unit versions that are current (or were at `as_of`), in unit and position order."""
        if as_of is not None:  # from the past state's table, read once (past_units_at), not a query per call
            table = self.past_units_at(as_of)[1].table
            return [table.rows[i] for i in table.of_units(unit_keys).tolist()]
        table = self.member_table
        return [table.row(i) for i in table.of_units(unit_keys).tolist()]

    def units_of(self, doc_ids: list[str]) -> dict[str, str]:
        unit_of = self.current.unit_of
        return {d: unit_of[d] for d in doc_ids if d in unit_of}

    def readable_ids(self, doc_ids: list[str], groups: frozenset[str]) -> set[str]:
        """Which of these documents have a current version whose ACL admits one of the groups."""
        return self.current.readable(doc_ids, groups)

    def unindexed(self, doc_ids: list[str]) -> list[CurrentVersion]:
        """Current versions no current unit holds yet: recorded by the documents step, not yet indexed."""
        current = self.current
        return [current.versions[d] for d in doc_ids if d in current.versions and d not in current.unit_of]

    def texts(self, rows: list[MemberRow] | list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, str]]:
        """(doc_id, version) → (title, text), from memory where already read by this process; a current version's
        text is read by its content hash (the text files are sorted by it), any other's through the documents."""
        keys = {(r.doc_id, r.doc_version) if isinstance(r, MemberRow) else r for r in rows}
        hashes = {key: self.current.content_hash(*key) for key in keys}
        cache = self._shared.texts
        out = {key: hit for key in keys if (hit := cache.get((*key, hashes[key] or ""))) is not None}
        by_hash = self.catalog.texts_of(sorted({hashes[k] for k in keys - out.keys() if hashes[k]}))
        for key in keys - out.keys():
            if by_hash.get(hashes[key]) is not None:  # only current versions are cached by hash
                out[key] = cache[(*key, hashes[key])] = (self.current.title(*key), by_hash[hashes[key]])
        fetched = self.catalog.document_texts(sorted(keys - out.keys()))
        for key in fetched.keys() & {k for k, h in hashes.items() if h}:  # a catalog without text files
            cache[(*key, hashes[key])] = fetched[key]
        return out | fetched

    @cached_property
    def embedder_name(self) -> str:
        """The embedder whose vector space this snapshot's index holds (the catalog's recorded choice)."""
        return workspace_embedder_name(self.catalog)

    @property
    def member_table(self) -> MemberTable:
        """The current members as arrays, for a hop's scoring (a part of the current state's files)."""
        return self.current.table

    @cached_property
    def code_rows(self) -> np.ndarray:
        """Per member code of the serving vectors (VectorState.member_codes), its row in member_table; -1 for rows of a
        member that is not current (its document deleted since the index step)."""
        return self._part("code_rows", lambda: Arrays({"rows": code_rows(self.vectors, self.member_table)}, {}),
                          lambda found: found["rows"])

    @cached_property
    def unit_codes(self) -> UnitCodes:
        """The serving vectors' units and documents as numbers, for ranking a hop's units (built once per snapshot)."""
        return self._part("unit_codes", lambda: unit_code_arrays(unit_codes(self.vectors, self.current.unit_of)),
                          unit_codes_of)

    @property
    def state_units(self) -> StateUnits:
        """The serving vectors' units, member table and link density as one (what past_units_at gives of a past time)."""
        return StateUnits(self.unit_codes, self.member_table, self.code_rows)

    @property
    def lookups(self) -> CurrentState:
        """The current state with what every question reads of it built (titles, unindexed documents): a part of its
        own, so that a server builds them beside the served state, not in the first question."""
        for name in ("titles", "unindexed_ids"):
            getattr(self.current, name)
        return self.current

    @cached_property
    def lexical(self) -> LexicalIndex:
        """BM25 over the current documents, each counted for the groups its ACL admits (the postings are reused
        across snapshots while the documents are unchanged)."""
        # A partitioned workspace's BM25 is kept per partition: its pairs are the catalog's, read per partition.
        pairs = None if isinstance(self.catalog, UnionCatalog) else {"": self.current.doc_hashes}
        found = self._part("lexical", lambda: lexical_arrays(
            lexical_index(self.catalog, self.current.acls, self._shared.lexical, pairs)), lexical_of)
        self._shared.lexical = found
        return found

    @cached_property
    def _files(self) -> StateFiles | None:
        """Where this snapshot's read state is written once and mapped (None: a snapshot over the writer's own
        catalog, whose state a transaction may still change)."""
        if self._shared.files is None:
            return None
        index = self.index.parts if isinstance(self.index, IndexUnion) else {"": self.index}
        # The setting decides whether the vectors part holds an IVF: a worker started with another one gets its
        # own folder instead of mapping an IVF it was told not to use, or building one in memory beside the files.
        return StateFiles(self._shared.files, snapshot_key(
            sorted((k, dataclasses.astuple(i)) for k, i in self.parts.items()),
            sorted((k, i.uri, i.version) for k, i in index.items()), ("ann_min_rows", ann_min_rows())))

    def _part(self, name: str, build: Callable[[], Arrays], load: Callable[[Arrays], T]) -> T:
        """A part of the read state as arrays: mapped from its files (written first by the worker that builds it),
        or kept in memory where there is no folder for them."""
        files = self._files
        return load(built(build) if files is None else files.part(name, partial(built, build)))

    def unit_rows(self, unit_keys: list[str], as_of: datetime | None = None) -> dict[str, UnitRows]:
        """Sub-chunk rows of these unit versions, read from the index once per process and then kept."""
        cache = self._shared.units
        missing = sorted(k for k in set(unit_keys) if k not in cache)
        if missing:
            membership = self.catalog.unit_membership(missing, as_of)
            doc_ids, members = sorted({r[3] for r in membership}), Membership.of(membership)
            index = self.index_at(as_of)
            for part in (index.parts.values() if isinstance(index, IndexUnion) else [index]):
                table, vectors = part.rows_of_docs(doc_ids, missing)
                placed, keys = place(table, members)
                _keep_unit_rows(cache, table.take(pa.array(placed)), vectors[placed], keys)
        return {k: cache[k] for k in unit_keys if k in cache}

    @cached_property
    def vectors(self) -> VectorState:
        """The serving copy of this snapshot's index; a partition's or table's rows are read once per table version,
        and a new version re-reads only the units it added."""
        state = self._part("vectors", lambda: vector_arrays(self._vector_rows()), vector_state)
        if not isinstance(self.index, IndexUnion):  # what the next table version's copy starts from: the mapped one
            self._shared.vectors[self.index.uri] = (self.index.version, state)
        return state

    def _vector_rows(self) -> VectorState:
        parts = self.index.parts if isinstance(self.index, IndexUnion) else {"": self.index}
        states = []
        for key, index in parts.items():
            version, state = self._shared.vectors.get(index.uri, (None, None))
            if version != index.version:
                state = load_state(index, state, self._membership(key, index))
                self._shared.vectors[index.uri] = (index.version, state)
            states.append(state)
        if len(states) == 1:
            return states[0]
        joined = union(states, self.index.dimension)
        if len(joined) >= max(ann_min_rows(), 1):  # the partitions keep the rows' lists: the next union assigns none
            ready(joined)
            share_lists(joined, states)
        return joined

    def vectors_at(self, as_of: datetime) -> VectorState:
        """The in-memory vectors of the index as the last publish before `as_of` left it: the units it shares with
        the current version are taken from memory, the others read; the last PAST_STATES_KEPT are kept."""
        index = self.index_at(as_of)
        parts = index.parts if isinstance(index, IndexUnion) else {"": index}
        states = []
        for name, part in parts.items():
            states.append(kept_last(self._shared.past, (part.uri, part.version), lambda: load_state(
                part, self._shared.vectors.get(part.uri, (None, None))[1], self._membership(name, part, as_of))))
        return states[0] if len(states) == 1 else union(states, self.index.dimension)

    def past_units_at(self, as_of: datetime) -> tuple[VectorState, StateUnits]:
        """vectors_at(as_of) and its units then (rag.retrieval.past_units), built once per past state and moment."""
        state, moment = self.vectors_at(as_of), self.moment_at(as_of)
        return state, per_state(self._shared.past_codes, state, moment,
                                lambda: past_units(state, self._members_at(moment)))

    def _members_at(self, as_of: datetime) -> dict[str, list[MemberRow]]:
        """Unit key → the members current at `as_of`, those of a version still current sharing its strings."""
        return rows_by_unit(map(partial(sharing_strings, self.current.versions),
                                self.catalog.current_members(None, as_of)))

    def lexical_at(self, as_of: datetime, state: VectorState) -> LexicalIndex:
        """BM25 over the texts current at `as_of` (rag.retrieval.lexical_past), built once per past state (`state`,
        vectors_at(as_of)) and moment from this snapshot's index and what changed since."""
        moment = self.moment_at(as_of)
        return per_state(self._past_lexical, state, moment, lambda: past_lexical(self.lexical, self.catalog, moment))

    def moment_at(self, as_of: datetime) -> datetime:
        """The last change the catalog's history records at or before `as_of` (a version's or unit's validity, a
        publish): the catalog answers as of both alike, so what is built of a past time is keyed by it."""
        # a query's hops ask again: the catalog is read once per time asked
        return kept_last(self._moments, as_of, lambda: self.catalog.last_change_at(as_of) or as_of)

    def warm(self) -> None:
        """Build everything a query reads from memory (members, ACLs, vectors, BM25) now, not in a query."""
        for name in WARM_PARTS:
            self.build(name)

    def build(self, part: str) -> None:
        """Build one part of the read state (one of WARM_PARTS) now, if not built yet; what its catalog reads cached
        is given back."""
        getattr(self, part)  # cached properties: built once per snapshot
        self.catalog.reopen()
        release_free_memory()

    def _membership(self, part: str, index: SubchunkIndex, as_of: datetime | None = None) -> Membership | None:
        """The unit membership that places a partition's index rows in this snapshot (or as of a time); None for a
        table whose rows name their units."""
        if index.unit_keyed:
            return None
        if not isinstance(self.catalog, UnionCatalog):
            return Membership.of_columns(self.catalog.membership_columns(as_of))
        with self._part_catalog(part) as catalog:
            return Membership.of_columns(catalog.membership_columns(as_of))

    def _part_catalog(self, part: str) -> closing[Catalog]:
        """One partition's catalog at the snapshot this one pins, closed when the block ends."""
        return closing(Catalog(self.catalog.path, snapshot=self.catalog.parts[part]))

    def index_at(self, as_of: datetime | None) -> SubchunkIndex:
        """The index as this snapshot pinned it, or as the last publish before `as_of` left it."""
        if as_of is None:
            return self.index
        moment = self.moment_at(as_of)  # a publish is a change: one index per moment (asked as of the time given)
        if isinstance(self.catalog, UnionCatalog):
            return kept_last(self._indexes_at, moment, lambda: self.index.at(self.catalog.versions_at(as_of)))
        return kept_last(self._indexes_at, moment, lambda: self.index.as_of(self.catalog.publish_at(as_of)[1]))

    def close(self) -> None:
        self.catalog.close()
