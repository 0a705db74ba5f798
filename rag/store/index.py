"""The sub-chunk index: one LanceDB row per sub-chunk, keyed by unit version, ACL as a list column."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag.models.embedders import DEFAULT_EMBEDDER, DIMENSION, EMBEDDERS
from rag.store.lance_table import PinnedTable
from rag.store.object_store import is_object_uri
from rag.store.settings import as_of_retention
from rag.units.subchunk_recipe import LEGACY_RECIPE, SubchunkRecipe

TABLE = "subchunks"
CACHE_TABLE = "vector_cache"
# Indexes this code no longer builds: every read scores the rows in memory (rag.retrieval.vectors), so they only
# cost bytes and upkeep; a table that has them loses them at its next publish.
UNUSED_INDEXES = ("vector_idx", "acl_idx")
MAX_FRAGMENTS = 16  # rows of the newest publishes sit in fragments of their own until there are this many
DELETED_SHARE = 0.5  # a fragment is rewritten without its deleted rows once they are this share of it
# A new table's vectors: each row scaled so its largest component is ±127 and rounded. Every read scales rows to unit
# length (cosine ignores scale), so no scale is stored; a quarter of float32, half of the float16 tables before it.
# A table keeps the type it was created with (float16 and float32 tables are read and written as they are).
VECTOR_TYPE = pa.int8()


def schema(dimension: int = DIMENSION, embedder: str = DEFAULT_EMBEDDER,
           recipe: str = SubchunkRecipe().name) -> pa.Schema:
    """The sub-chunk table's schema; the vector width follows the embedder, whose name the table carries, with
    the name of the recipe its rows were cut and embedded by."""
    return pa.schema([
        ("chunk_id", pa.string()), ("unit_key", pa.string()), ("unit_id", pa.string()),
        ("unit_version", pa.int32()), ("doc_id", pa.string()), ("doc_version", pa.string()),
        ("part", pa.int32()), ("acl", pa.list_(pa.string())), ("collection", pa.string()),
        ("char_start", pa.int32()), ("char_end", pa.int32()), ("tokens", pa.int32()),
        ("text_hash", pa.string()), ("vector", pa.list_(VECTOR_TYPE, dimension)),
    ], metadata={"embedder": embedder, "subchunk_recipe": recipe})


def cache_schema(dimension: int = DIMENSION, embedder: str = DEFAULT_EMBEDDER) -> pa.Schema:
    """Vectors of texts that left the table, with when they left (a cache from before that: kept for good)."""
    return pa.schema([("text_hash", pa.string()), ("vector", pa.list_(VECTOR_TYPE, dimension)),
                      ("cached_at", pa.timestamp("us"))], metadata={"embedder": embedder})


SCHEMA = schema()
SEARCH_COLUMNS = ["unit_key", "unit_id", "doc_id", "doc_version", "part", "char_start", "char_end"]
IDENTITY_TABLE = "store_identity"
IDENTITY_SCHEMA = pa.schema([("store_id", pa.string())])


@dataclass
class SubchunkRow:
    chunk_id: str
    unit_key: str
    unit_id: str
    unit_version: int
    doc_id: str
    doc_version: str
    part: int
    acl: tuple[str, ...]
    collection: str
    char_start: int
    char_end: int
    tokens: int
    text_hash: str


class SubchunkIndex:
    """Rows are written before the catalog makes their unit current, and deleted after it retires it."""

    def __init__(self, uri: str | Path):
        import lancedb  # imported by writers only: a reader of the current snapshot needs Lance alone (PinnedTable)

        self.uri = str(uri)
        self.db = lancedb.connect(self.uri)
        self.table = self._open(TABLE, schema())
        self.cache = self._open(CACHE_TABLE, cache_schema())

    def _open(self, name: str, schema: pa.Schema, replace: bool = False):
        if name in self.db.list_tables().tables and not replace:
            return self.db.open_table(name)
        return self.db.create_table(name, schema=schema, mode="overwrite" if replace else "create")

    @property
    def dimension(self) -> int:
        return self.table.schema.field("vector").type.list_size

    @property
    def embedder(self) -> str:
        """The embedder whose space the table's vectors are in (a table from before the choice existed: MiniLM)."""
        meta = self.table.schema.metadata or {}
        return meta.get(b"embedder", DEFAULT_EMBEDDER.encode()).decode()

    @property
    def recipe(self) -> str:
        """The sub-chunk recipe of the table's rows, by name (a table from before it was recorded: the legacy one)."""
        meta = self.table.schema.metadata or {}
        return meta.get(b"subchunk_recipe", LEGACY_RECIPE.name.encode()).decode()

    def rechunk(self, recipe: str) -> int:
        """Empty the table for another sub-chunk recipe, keeping its vectors in the cache (same vector space)."""
        removed = self.remove_units(self.unit_keys())
        self.table = self._open(TABLE, schema(self.dimension, self.embedder, recipe), replace=True)
        return removed

    def reset(self, embedder: str) -> None:
        """Empty the table and the vector cache and re-create them for another embedder's vector space."""
        dim = EMBEDDERS[embedder].dimension
        self.table = self._open(TABLE, schema(dim, embedder, self.recipe), replace=True)
        self.cache = self._open(CACHE_TABLE, cache_schema(dim, embedder), replace=True)

    @classmethod
    def reader(cls, uri: str | Path, version: int | None) -> "SubchunkIndex":
        """A read-only view at a table version (a published snapshot's); it creates and writes nothing."""
        view = cls.__new__(cls)
        view.uri, view.db = str(uri), None
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
        view.cache = None
        return view

    def as_of(self, version: int) -> "SubchunkIndex":
        """A read-only view of the table as a past publish left it (LanceDB keeps old versions until cleanup)."""
        return SubchunkIndex.reader(self.uri, version)

    @property
    def version(self) -> int:
        return self.table.version

    def count(self) -> int:
        return self.table.count_rows()

    def unit_keys(self) -> set[str]:
        col = self.table.to_lance().to_table(columns=["unit_key"]).column("unit_key")
        return set(pc.unique(col).to_pylist())

    def cached_vectors(self, hashes: list[str], elsewhere: list["SubchunkIndex"] = ()) -> dict[str, np.ndarray]:
        """Vectors already computed for these texts: live rows, the cache of removed rows, then other indexes'
        rows in the same vector space (another partition's, read-only)."""
        wanted = pa.array(sorted(set(hashes)), pa.string())
        found: dict[str, np.ndarray] = {}
        others = [o.table for o in elsewhere if (o.embedder, o.dimension) == (self.embedder, self.dimension)]
        for tbl in (self.table, self.cache, *others):
            if not len(wanted) or tbl.count_rows() == 0:
                continue
            data = tbl.to_lance().to_table(columns=["text_hash", "vector"],
                                           filter=pc.is_in(pc.field("text_hash"), wanted))
            vecs = _matrix(data.column("vector"), self.dimension)
            for h, v in zip(data.column("text_hash").to_pylist(), vecs):
                found.setdefault(h, v)
            wanted = pa.array([h for h in wanted.to_pylist() if h not in found], pa.string())
        return found

    def rows_of_units(self, unit_keys: list[str]) -> tuple[pa.Table, np.ndarray]:
        """Every sub-chunk row of these unit versions (scalar-index look-up, no vector search) and its vectors."""
        data = self.table.to_lance().to_table(
            columns=[*SEARCH_COLUMNS, "acl", "vector"],
            filter=pc.is_in(pc.field("unit_key"), pa.array(sorted(set(unit_keys)), pa.string())))
        return data.drop_columns(["vector"]), _matrix(data.column("vector"), self.dimension)

    def add(self, rows: list[SubchunkRow], vectors: np.ndarray) -> None:
        if not rows:
            return
        cols = {name: [getattr(r, name) for r in rows] for name in SCHEMA.names if name != "vector"}
        cols["acl"] = [list(a) for a in cols["acl"]]
        cols["vector"] = vector_array(vectors, self.table.schema.field("vector").type)
        self.table.add(pa.table(cols, schema=self.table.schema))

    def remove_units(self, unit_keys: set[str]) -> int:
        """Delete the rows of these unit versions, keeping in the cache the vectors no remaining row holds.

        A re-published unit's unchanged members keep their texts in the new version's rows, so only the vectors
        of texts that left the table are cached: every vector ever computed stays in the table or the cache.
        """
        if not unit_keys:
            return 0
        keys = pa.array(sorted(unit_keys), pa.string())
        gone = self.table.to_lance().to_table(columns=["text_hash", "vector"],
                                              filter=pc.is_in(pc.field("unit_key"), keys))
        if gone.num_rows:
            hashes = np.asarray(gone.column("text_hash").to_pylist(), dtype=object)
            unique, first = np.unique(hashes, return_index=True)
            stays = pc.is_in(pc.field("text_hash"), pa.array(unique.tolist(), pa.string())) & ~pc.is_in(
                pc.field("unit_key"), keys)
            kept = set(self.table.to_lance().to_table(columns=["text_hash"], filter=stays)
                       .column("text_hash").to_pylist())
            leaving = [int(i) for i in first if hashes[i] not in kept]
            if leaving:
                rows = gone.take(pa.array(leaving))
                rows = rows.set_column(1, "vector", vector_array(_matrix(rows.column("vector"), self.dimension),
                                                                 self.cache.schema.field("vector").type))
                if "cached_at" in self.cache.schema.names:
                    rows = rows.append_column("cached_at", pa.array([datetime.now(timezone.utc).replace(tzinfo=None)]
                                                                    * rows.num_rows, pa.timestamp("us")))
                self.cache.merge_insert("text_hash").when_not_matched_insert_all().execute(rows)
        self.table.delete(f"unit_key IN ({_sql_list(unit_keys)})")
        return gone.num_rows

    def ensure_indexes(self) -> None:
        """A B-tree on unit_key for the look-ups of units' rows, and the maintenance after a publish."""
        from lancedb.index import BTree

        names = {i.name for i in self.table.list_indices()}
        for name in names.intersection(UNUSED_INDEXES):
            self.table.drop_index(name)
        if self.table.count_rows() and "unit_key_idx" not in names:
            self.table.create_index("unit_key", config=BTree(), name="unit_key_idx")
        elif names:
            self.maintain()

    def maintain(self) -> None:
        """Drop table versions and cached vectors past the retention; rewrite the fragments whose rows were mostly
        deleted (re-published units leave their old rows behind); compact everything once many fragments pile up.

        Compaction rewrites what it merges and the versions kept for as-of reads hold the files it replaced, so
        only fragments with at least `DELETED_SHARE` of their rows deleted are rewritten: the copy kept for the
        retention is never larger than the rows already deleted, and past it only live rows stay.
        """
        retention = as_of_retention()
        self._expire_cache(retention)
        for table in (self.table, self.cache):
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

    def _expire_cache(self, retention: timedelta) -> None:
        """A removed text's vector is kept for the retention (a document put back within it is not re-embedded)."""
        if "cached_at" in self.cache.schema.names:
            cutoff = (datetime.now(timezone.utc) - retention).replace(tzinfo=None)
            expired = f"cached_at < TIMESTAMP '{cutoff:%Y-%m-%d %H:%M:%S.%f}'"
            if self.cache.count_rows(expired):  # a delete of nothing would still write a table version
                self.cache.delete(expired)

    def store_id(self) -> str | None:
        """The catalog identity this index was built for (None: never claimed)."""
        if IDENTITY_TABLE not in self.db.list_tables().tables:
            return None
        ids = self.db.open_table(IDENTITY_TABLE).to_arrow().column("store_id").to_pylist()
        return ids[0] if ids else None

    def claim(self, store_id: str) -> None:
        """Record which catalog this index now belongs to (after its foreign rows were removed)."""
        exists = IDENTITY_TABLE in self.db.list_tables().tables
        self.db.create_table(IDENTITY_TABLE, pa.table({"store_id": [store_id]}, schema=IDENTITY_SCHEMA),
                             mode="overwrite" if exists else "create")  # "overwrite" of nothing prints a WARN

    def row_facts(self) -> pa.Table:
        """What the consistency checks compare with the catalog, for every row."""
        return self.table.to_lance().to_table(columns=["unit_key", "doc_id", "doc_version", "part", "acl",
                                                       "char_start", "char_end", "text_hash"])


def vector_array(vectors: np.ndarray, list_type: pa.FixedSizeListType) -> pa.FixedSizeListArray:
    """Vectors as a column of this list type: int8 rows scaled so their largest component is ±127 (a row that was
    quantised so already comes back unchanged), float rows cast."""
    values = np.asarray(vectors, dtype=np.float32)
    if pa.types.is_integer(list_type.value_type):
        peak = np.maximum(np.abs(values).max(axis=1, keepdims=True, initial=0.0), 1e-12)
        values = np.rint(values * (127.0 / peak))
    flat = np.ascontiguousarray(values, dtype=list_type.value_type.to_pandas_dtype()).ravel()
    return pa.FixedSizeListArray.from_arrays(pa.array(flat), list_type.list_size)


def _matrix(column: pa.ChunkedArray, dimension: int) -> np.ndarray:
    if column.num_chunks == 0:
        return np.zeros((0, dimension), dtype=np.float32)
    return column.combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(-1, dimension).astype(np.float32)


def _sql_list(values) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in sorted(values))
