"""The sub-chunk index: one LanceDB row per sub-chunk, keyed by document version and member range, ACL as a list
column; the vectors apart, one per text (rag.store.text_vectors).

A row names no unit: the unit holding it is resolved per snapshot from the catalog's unit membership
(rag.store.row_units), so re-grouping a unit writes rows only for its members that are new or changed.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag.models.embedders import DEFAULT_EMBEDDER, DIMENSION, EMBEDDERS
from rag.store.lance_folder import LanceFolder, zstd_field
from rag.store.lance_table import PinnedTable
from rag.store.object_store import is_object_uri
from rag.store.settings import as_of_retention
from rag.store.text_vectors import (
    DEPARTED_SCHEMA,
    DEPARTED_TABLE,
    VECTORS_TABLE,
    aligned,
    append_new,
    by_hash,
    expire,
    mark_departed,
    matrix,
    sql_list,
    vectors_schema,
)
from rag.units.subchunk_recipe import LEGACY_RECIPE_NAME, SubchunkRecipe

TABLE = "subchunks"
CACHE_TABLE = "vector_cache"  # before the vectors table: vectors of texts that left, moved there at the next publish
# Indexes this code no longer builds: every read scores the rows in memory (rag.retrieval.vectors), so they only
# cost bytes and upkeep; a table that has them loses them at its next publish.
UNUSED_INDEXES = ("vector_idx", "acl_idx", "unit_key_idx")
# Columns this code no longer writes: `chunk_id` (unit key, member position, sub-chunk number) was read by nothing
# and was a fifth of a row's bytes, re-written with every row of a re-published unit (bench/storage.py).
UNUSED_COLUMNS = ("chunk_id",)
# The column of a table whose rows were keyed by unit version: the next publish re-cuts it by document version.
UNIT_KEYED = "unit_key"
MAX_FRAGMENTS = 16  # rows of the newest publishes sit in fragments of their own until there are this many
DELETED_SHARE = 0.5  # a fragment is rewritten without its deleted rows once they are this share of it


def schema(embedder: str = DEFAULT_EMBEDDER, recipe: str = SubchunkRecipe().name) -> pa.Schema:
    """The sub-chunk table's schema; it names the embedder whose space its texts' vectors are in and the recipe its
    rows were cut by. A table from before the vectors table holds a `vector` column as well (read alike)."""
    return pa.schema([
        zstd_field("doc_id", pa.string()), zstd_field("doc_version", pa.string()), ("part", pa.int32()),
        ("member_start", pa.int32()), ("member_end", pa.int32()),
        ("acl", pa.list_(pa.string())), ("collection", pa.string()),
        ("char_start", pa.int32()), ("char_end", pa.int32()), ("tokens", pa.int32()),
        zstd_field("text_hash", pa.string()),
    ], metadata={"embedder": embedder, "subchunk_recipe": recipe})


SCHEMA = schema()
# What identifies a member's rows: document version, part, member range, and the unit's ACL and collection.
KEY_COLUMNS = ["doc_id", "doc_version", "part", "member_start", "member_end", "acl", "collection"]
MemberKey = tuple[str, str, int, int, int, tuple[str, ...], str]
IDENTITY_TABLE = "store_identity"
IDENTITY_SCHEMA = pa.schema([("store_id", pa.string())])


def member_keys(data: pa.Table) -> list[MemberKey]:
    """Each row's member key (`KEY_COLUMNS`, its ACL as a tuple)."""
    cols = [data.column(c).to_pylist() for c in KEY_COLUMNS]
    acl = KEY_COLUMNS.index("acl")
    cols[acl] = [tuple(a) for a in cols[acl]]
    return list(zip(*cols))


def row_columns(schema: pa.Schema) -> list[str]:
    """The columns that place a table's rows: its unit key if it has one, else the member key and row start."""
    return [UNIT_KEYED, "char_start"] if UNIT_KEYED in schema.names else [*KEY_COLUMNS, "char_start"]


@dataclass
class SubchunkRow:
    doc_id: str
    doc_version: str
    part: int
    member_start: int
    member_end: int
    acl: tuple[str, ...]
    collection: str
    char_start: int
    char_end: int
    tokens: int
    text_hash: str


class SubchunkIndex:
    """Rows are written before the catalog makes their unit current, and deleted after it retires it; a text's
    vector is stored before the first row that holds it."""

    def __init__(self, uri: str | Path):
        self.uri = str(uri)
        self.db = LanceFolder(self.uri)   # Lance alone: a writer never pays for importing LanceDB
        self.table = self._open(TABLE, schema())
        dimension = self.table.schema.field("vector").type.list_size if self.in_rows else DIMENSION
        self._vectors = self._open(VECTORS_TABLE, vectors_schema(dimension, self.embedder))
        self.departed = self._open(DEPARTED_TABLE, DEPARTED_SCHEMA)

    def _open(self, name: str, schema: pa.Schema, replace: bool = False):
        if self.db.exists(name) and not replace:
            return self.db.open_table(name)
        return self.db.create_table(name, schema=schema, mode="overwrite" if replace else "create")

    @property
    def in_rows(self) -> bool:
        """Whether this table version holds its vectors in its rows (written before the vectors table existed)."""
        return "vector" in self.table.schema.names

    @property
    def vectors(self):
        """The vectors by text hash (a reader opens the newest version: it holds every vector a kept row needs)."""
        if self._vectors is None:
            if is_object_uri(self.uri):
                import lancedb

                self._vectors = lancedb.connect(self.uri).open_table(VECTORS_TABLE)
            else:
                self._vectors = PinnedTable(self.uri, VECTORS_TABLE, None)
        return self._vectors

    @property
    def dimension(self) -> int:
        vectors = self.table if self.in_rows else self.vectors
        return vectors.schema.field("vector").type.list_size

    @property
    def embedder(self) -> str:
        """The embedder whose space the table's vectors are in (a table from before the choice existed: MiniLM)."""
        meta = self.table.schema.metadata or {}
        return meta.get(b"embedder", DEFAULT_EMBEDDER.encode()).decode()

    @property
    def recipe(self) -> str:
        """The sub-chunk recipe of the table's rows, by name (a table from before it was recorded: the legacy one)."""
        meta = self.table.schema.metadata or {}
        return meta.get(b"subchunk_recipe", LEGACY_RECIPE_NAME.encode()).decode()

    def rechunk(self, recipe: str) -> int:
        """Empty the table for another sub-chunk recipe; the texts' vectors stay (same vector space)."""
        removed = self.remove_all()
        self.table = self._open(TABLE, schema(self.embedder, recipe), replace=True)
        return removed

    @property
    def unit_keyed(self) -> bool:
        """Whether this table version's rows are keyed by unit version (written before rows were keyed by
        document version; read as written, re-cut by the next publish)."""
        return UNIT_KEYED in self.table.schema.names

    def rekey(self) -> int:
        """Empty a table whose rows are keyed by unit version, to be filled again keyed by document version (its
        texts keep their vectors: nothing is embedded again); how many rows it held. Its older versions keep
        their rows for as-of reads."""
        return self.rechunk(self.recipe) if self.unit_keyed else 0

    def reset(self, embedder: str) -> None:
        """Empty the table and the vectors and re-create them for another embedder's vector space."""
        self.table = self._open(TABLE, schema(embedder, self.recipe), replace=True)
        self._vectors = self._open(VECTORS_TABLE, vectors_schema(EMBEDDERS[embedder].dimension, embedder), replace=True)
        self.departed = self._open(DEPARTED_TABLE, DEPARTED_SCHEMA, replace=True)

    def separate_vectors(self) -> int:
        """Move the vectors of a table from before the vectors table (its rows' and its cache's) into the vectors
        table, once; how many texts. Its older versions keep theirs in their rows for as-of reads."""
        if not self.in_rows and not self.db.exists(CACHE_TABLE):
            return 0
        cache = self.db.open_table(CACHE_TABLE) if self.db.exists(CACHE_TABLE) else None
        parts = [t.to_lance().to_table(columns=["text_hash", "vector"])
                 for t in ([self.table] if self.in_rows else []) + ([cache] if cache is not None else [])]
        hashes = [h for part in parts for h in part.column("text_hash").to_pylist()]
        moved = append_new(self.vectors, hashes, np.concatenate(
            [matrix(part.column("vector"), self.dimension) for part in parts])) if hashes else 0
        if cache is not None:  # its texts left the table at the latest now: they expire a retention from now
            live = set(pc.unique(self.table.to_lance().to_table(columns=["text_hash"]).column("text_hash"))
                       .to_pylist())
            mark_departed(self.departed, sorted(set(parts[-1].column("text_hash").to_pylist()) - live))
        if self.in_rows:  # dropping the column alone would leave its bytes in the data files: rewrite the rest once
            self.table.drop_columns(["vector"])
            rest = self.table.to_lance().to_table()
            self.table.add(rest.replace_schema_metadata(self.table.schema.metadata), mode="overwrite")
        if cache is not None:
            self.db.drop_table(CACHE_TABLE)
        return moved

    def drop_unused_columns(self) -> list[str]:
        """Drop the columns of an older table this code no longer writes (its older versions keep them)."""
        unused = [c for c in UNUSED_COLUMNS if c in self.table.schema.names]
        if unused:
            self.table.drop_columns(unused)
        return unused

    @classmethod
    def reader(cls, uri: str | Path, version: int | None) -> "SubchunkIndex":
        """A read-only view at a table version (a published snapshot's); it creates and writes nothing."""
        view = cls.__new__(cls)
        view.uri, view.db, view._vectors, view.departed = str(uri), None, None, None
        try:
            if is_object_uri(view.uri):
                import lancedb

                view.db = lancedb.connect(view.uri)
                view.table = view.db.open_table(TABLE)
                if version is not None:
                    view.table.checkout(version)
            else:
                view.table = PinnedTable(view.uri, TABLE, version)
        except Exception as err:  # lance raises several types for a missing, cleaned-up or unknown version
            raise LookupError(f"{uri}: index table version {version} is not available "
                              f"({str(err).splitlines()[0][:200]})") from None
        return view

    def as_of(self, version: int) -> "SubchunkIndex":
        """A read-only view of the table as a past publish left it (LanceDB keeps old versions until cleanup)."""
        return SubchunkIndex.reader(self.uri, version)

    @property
    def version(self) -> int:
        return self.table.version

    def count(self) -> int:
        return self.table.count_rows()

    def member_keys(self, doc_ids: set[str] | None = None) -> set[MemberKey]:
        """The members whose rows the table holds (of these documents only, through the doc_id B-tree, if given)."""
        return set(member_keys(self.table.to_lance().to_table(columns=KEY_COLUMNS, filter=docs_predicate(doc_ids))))

    def rows(self, columns: list[str], filter: pc.Expression | None = None, dataset=None) -> tuple[pa.Table, pa.Array]:
        """These columns of the rows (of `dataset`, a version of the table; the table by default) that pass the
        filter, and each row's stored vector, from its row or by its text's hash."""
        dataset = dataset if dataset is not None else self.table.to_lance()
        extra = self._vector_columns(dataset, columns)
        return self._split_vectors(dataset.to_table(columns=[*columns, *extra], filter=filter), extra)

    def rows_at(self, positions: np.ndarray, columns: list[str], dataset) -> tuple[pa.Table, pa.Array, np.ndarray]:
        """These columns of the rows at these positions of a table version, in that order; their vectors in
        ascending position order, and where each position's vector lies in them: reordering them here copied every
        stored vector once more, where the caller gathers them a block at a time as it converts them."""
        ordered = np.sort(positions)
        extra = self._vector_columns(dataset, columns)
        at = np.searchsorted(ordered, positions)
        data, vectors = self._split_vectors(dataset.take(ordered, columns=[*columns, *extra]), extra)
        return data.take(pa.array(at)), vectors, at

    @staticmethod
    def _vector_columns(dataset, columns: list[str]) -> list[str]:
        return ["vector"] if "vector" in dataset.schema.names else [] if "text_hash" in columns else ["text_hash"]

    def _split_vectors(self, data: pa.Table, extra: list[str]) -> tuple[pa.Table, pa.Array]:
        if "vector" in extra:
            return data.drop_columns(["vector"]), data.column("vector").combine_chunks()
        hashes = data.column("text_hash").combine_chunks()
        vectors = aligned(self.vectors, hashes) if len(hashes) else pa.array(
            [], self.vectors.schema.field("vector").type)
        return data.drop_columns(extra), vectors

    def cached_vectors(self, hashes: list[str], elsewhere: list["SubchunkIndex"] = ()) -> dict[str, np.ndarray]:
        """Vectors already computed for these texts: this index's, then other indexes' in the same vector space
        (another partition's, read-only)."""
        found: dict[str, np.ndarray] = {}
        others = [o for o in elsewhere if (o.embedder, o.dimension) == (self.embedder, self.dimension)]
        for index in (self, *others):
            wanted = sorted(set(hashes) - set(found))
            if not wanted:
                break
            if index.in_rows:
                data, vectors = index.rows(["text_hash"], pc.is_in(pc.field("text_hash"), pa.array(wanted)))
                found.update(zip(data.column("text_hash").to_pylist(), matrix(vectors, index.dimension)))
            else:
                found.update(by_hash(index.vectors, wanted))
        return found

    def rows_of_docs(self, doc_ids: list[str], unit_keys: list[str]) -> tuple[pa.Table, np.ndarray]:
        """Every sub-chunk row of these documents (scalar-index look-up, no vector search) and its vectors; of
        these unit versions in a table keyed by unit version."""
        column, values = (UNIT_KEYED, unit_keys) if self.unit_keyed else ("doc_id", doc_ids)
        columns = list(dict.fromkeys([*row_columns(self.table.schema), "doc_id", "part", "char_end", "acl"]))
        data, vectors = self.rows(columns, pc.is_in(pc.field(column), pa.array(sorted(set(values)), pa.string())))
        return data, matrix(vectors, self.dimension)

    def add(self, rows: list[SubchunkRow], vectors: np.ndarray) -> None:
        """Store the vectors of texts not stored yet, then the rows."""
        if not rows:
            return
        append_new(self.vectors, [r.text_hash for r in rows], vectors)
        cols = {name: [getattr(r, name) for r in rows] for name in SCHEMA.names}
        cols["acl"] = [list(a) for a in cols["acl"]]
        self.table.add(pa.table(cols, schema=self.table.schema))

    def remove_stale(self, live: set[MemberKey], doc_ids: set[str] | None = None) -> tuple[int, set[MemberKey]]:
        """Delete the rows of every document version holding a member no live unit has (among these documents'
        rows, if given: `live` then needs only their members); the texts no remaining row holds are marked as left
        from now (their vectors stay for the retention: every vector ever computed and kept is in the vectors
        table). Returns the rows deleted and the live members among them, whose rows the caller writes again (a
        member whose unit's ACL or range changed in place; rare)."""
        data = self.table.to_lance().to_table(columns=[*KEY_COLUMNS, "text_hash"], filter=docs_predicate(doc_ids))
        keys = member_keys(data)
        stale = {(k[0], k[1]) for k in set(keys) - live}
        if not stale:
            return 0, set()
        gone = np.fromiter(((k[0], k[1]) in stale for k in keys), dtype=bool, count=len(keys))
        hashes = np.asarray(data.column("text_hash").to_pylist(), dtype=object)
        # A text another document's row still holds may be marked too: `expire` keeps the vector of a held text.
        mark_departed(self.departed, sorted(set(hashes[gone]) - set(hashes[~gone])))
        self.table.delete(pairs_predicate(stale))
        return int(gone.sum()), {k for k in live if (k[0], k[1]) in stale}

    def remove_all(self) -> int:
        """Delete every row; their texts are marked as left from now."""
        hashes = self.table.to_lance().to_table(columns=["text_hash"]).column("text_hash")
        if not len(hashes):
            return 0
        mark_departed(self.departed, sorted(set(pc.unique(hashes).to_pylist())))
        self.table.delete("true")
        return len(hashes)

    def ensure_indexes(self, published: set[int] | None = None) -> None:
        """B-trees on doc_id (a unit's rows) and on the vectors' text_hash, and the maintenance after a publish
        (`published`: see maintain)."""
        names = {i.name for i in self.table.list_indices()}
        for name in names.intersection(UNUSED_INDEXES):
            self.table.drop_index(name)
        if self.vectors.count_rows() and "text_hash_idx" not in {i.name for i in self.vectors.list_indices()}:
            self.vectors.create_btree("text_hash", "text_hash_idx")
        if self.table.count_rows() and "doc_id_idx" not in names:
            self.table.create_btree("doc_id", "doc_id_idx")
        elif names:
            self.maintain(published)

    def maintain(self, published: set[int] | None = None) -> None:
        """Drop table versions and left texts' vectors past the retention; rewrite the fragments whose rows were
        mostly deleted (re-published units leave their old rows behind); compact everything once many fragments
        pile up. With `published`, the table versions that publishes named and as-of reads may still open, every
        other version of the sub-chunk table but the newest goes now: no reader ever opens one.

        Compaction rewrites what it merges and the versions kept for as-of reads hold the files it replaced, so
        only fragments with at least `DELETED_SHARE` of their rows deleted are rewritten: the copy kept for the
        retention is never larger than the rows already deleted, and past it only live rows stay.
        """
        retention = as_of_retention()
        expire(self.vectors, self.departed, self.table, retention)
        for table in (self.table, self.vectors, self.departed):
            fragments = table.to_lance().get_fragments()
            if len(fragments) > MAX_FRAGMENTS:
                table.optimize(cleanup_older_than=retention)
                continue
            keep = [f.fragment_id for f in fragments if f.count_rows() > (1 - DELETED_SHARE) * f.physical_rows]
            if len(keep) < len(fragments):
                table.to_lance().optimize.compact_files(excluded_fragment_ids=keep,
                                                        materialize_deletions_threshold=DELETED_SHARE)
                table.checkout_latest()
            table.to_lance().cleanup_old_versions(older_than=retention)
        if published is not None:
            dataset = self.table.to_lance()
            unread = [v["version"] for v in dataset.versions() if v["version"] not in published | {dataset.version}]
            if unread:
                dataset.cleanup_old_versions(older_than=timedelta(0), versions=unread)

    def store_id(self) -> str | None:
        """The catalog identity this index was built for (None: never claimed)."""
        if not self.db.exists(IDENTITY_TABLE):
            return None
        ids = self.db.open_table(IDENTITY_TABLE).to_arrow().column("store_id").to_pylist()
        return ids[0] if ids else None

    def claim(self, store_id: str) -> None:
        """Record which catalog this index now belongs to (after its foreign rows were removed)."""
        self.db.create_table(IDENTITY_TABLE, pa.table({"store_id": [store_id]}, schema=IDENTITY_SCHEMA),
                             mode="overwrite" if self.db.exists(IDENTITY_TABLE) else "create")

    def row_facts(self) -> pa.Table:
        """What the consistency checks compare with the catalog, for every row."""
        return self.table.to_lance().to_table(columns=[*KEY_COLUMNS, "char_start", "char_end", "text_hash"])


def docs_predicate(doc_ids: set[str] | None) -> str | None:
    """A Lance filter for these documents' rows (None: every row; `false` for none)."""
    if doc_ids is None:
        return None
    return f"doc_id IN ({sql_list(doc_ids)})" if doc_ids else "false"


def pairs_predicate(pairs: set[tuple[str, str]]) -> str:
    """SQL for the rows of these (doc_id, doc_version) pairs, one IN list per version label (labels are few)."""
    by_version: dict[str, list[str]] = {}
    for doc_id, version in pairs:
        by_version.setdefault(version, []).append(doc_id)
    return " OR ".join(f"(doc_version = {sql_list([v])} AND doc_id IN ({sql_list(ids)}))"
                       for v, ids in sorted(by_version.items()))
