"""The sub-chunk index: one LanceDB row per sub-chunk, keyed by unit version, ACL as a list column; the vectors
apart, one per text (rag.store.text_vectors)."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag.models.embedders import DEFAULT_EMBEDDER, DIMENSION, EMBEDDERS
from rag.store.lance_folder import LanceFolder
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
from rag.units.subchunk_recipe import LEGACY_RECIPE, SubchunkRecipe

TABLE = "subchunks"
CACHE_TABLE = "vector_cache"  # before the vectors table: vectors of texts that left, moved there at the next publish
# Indexes this code no longer builds: every read scores the rows in memory (rag.retrieval.vectors), so they only
# cost bytes and upkeep; a table that has them loses them at its next publish.
UNUSED_INDEXES = ("vector_idx", "acl_idx")
# Columns this code no longer writes: `chunk_id` (unit key, member position, sub-chunk number) was read by nothing
# and was a fifth of a row's bytes, re-written with every row of a re-published unit (bench/storage.py).
UNUSED_COLUMNS = ("chunk_id",)
MAX_FRAGMENTS = 16  # rows of the newest publishes sit in fragments of their own until there are this many
DELETED_SHARE = 0.5  # a fragment is rewritten without its deleted rows once they are this share of it


def schema(embedder: str = DEFAULT_EMBEDDER, recipe: str = SubchunkRecipe().name) -> pa.Schema:
    """The sub-chunk table's schema; it names the embedder whose space its texts' vectors are in and the recipe its
    rows were cut by. A table from before the vectors table holds a `vector` column as well (read alike)."""
    return pa.schema([
        ("unit_key", pa.string()), ("unit_id", pa.string()),
        ("unit_version", pa.int32()), ("doc_id", pa.string()), ("doc_version", pa.string()),
        ("part", pa.int32()), ("acl", pa.list_(pa.string())), ("collection", pa.string()),
        ("char_start", pa.int32()), ("char_end", pa.int32()), ("tokens", pa.int32()),
        ("text_hash", pa.string()),
    ], metadata={"embedder": embedder, "subchunk_recipe": recipe})


SCHEMA = schema()
SEARCH_COLUMNS = ["unit_key", "unit_id", "doc_id", "doc_version", "part", "char_start", "char_end"]
IDENTITY_TABLE = "store_identity"
IDENTITY_SCHEMA = pa.schema([("store_id", pa.string())])


@dataclass
class SubchunkRow:
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
        return meta.get(b"subchunk_recipe", LEGACY_RECIPE.name.encode()).decode()

    def rechunk(self, recipe: str) -> int:
        """Empty the table for another sub-chunk recipe; the texts' vectors stay (same vector space)."""
        removed = self.remove_units(self.unit_keys())
        self.table = self._open(TABLE, schema(self.embedder, recipe), replace=True)
        return removed

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

    def unit_keys(self) -> set[str]:
        col = self.table.to_lance().to_table(columns=["unit_key"]).column("unit_key")
        return set(pc.unique(col).to_pylist())

    def rows(self, columns: list[str], filter: pc.Expression | None = None, dataset=None) -> tuple[pa.Table, pa.Array]:
        """These columns of the rows (of `dataset`, a version of the table; the table by default) that pass the
        filter, and each row's stored vector, from its row or by its text's hash."""
        dataset = dataset if dataset is not None else self.table.to_lance()
        in_rows = "vector" in dataset.schema.names
        extra = ["vector"] if in_rows else [] if "text_hash" in columns else ["text_hash"]
        data = dataset.to_table(columns=[*columns, *extra], filter=filter)
        if in_rows:
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

    def rows_of_units(self, unit_keys: list[str]) -> tuple[pa.Table, np.ndarray]:
        """Every sub-chunk row of these unit versions (scalar-index look-up, no vector search) and its vectors."""
        data, vectors = self.rows([*SEARCH_COLUMNS, "acl"], pc.is_in(pc.field("unit_key"), pa.array(
            sorted(set(unit_keys)), pa.string())))
        return data, matrix(vectors, self.dimension)

    def add(self, rows: list[SubchunkRow], vectors: np.ndarray) -> None:
        """Store the vectors of texts not stored yet, then the rows."""
        if not rows:
            return
        append_new(self.vectors, [r.text_hash for r in rows], vectors)
        cols = {name: [getattr(r, name) for r in rows] for name in SCHEMA.names}
        cols["acl"] = [list(a) for a in cols["acl"]]
        self.table.add(pa.table(cols, schema=self.table.schema))

    def remove_units(self, unit_keys: set[str]) -> int:
        """Delete the rows of these unit versions; the texts no remaining row holds are marked as left from now
        (their vectors stay for the retention: every vector ever computed and kept is in the vectors table)."""
        if not unit_keys:
            return 0
        keys = pa.array(sorted(unit_keys), pa.string())
        gone = self.table.to_lance().to_table(columns=["text_hash"], filter=pc.is_in(pc.field("unit_key"), keys))
        if gone.num_rows:
            unique = pc.unique(gone.column("text_hash"))
            stays = pc.is_in(pc.field("text_hash"), unique) & ~pc.is_in(pc.field("unit_key"), keys)
            kept = set(self.table.to_lance().to_table(columns=["text_hash"], filter=stays)
                       .column("text_hash").to_pylist())
            mark_departed(self.departed, sorted(set(unique.to_pylist()) - kept))
        self.table.delete(f"unit_key IN ({sql_list(unit_keys)})")
        return gone.num_rows

    def ensure_indexes(self, published: set[int] | None = None) -> None:
        """B-trees on unit_key (a unit's rows) and on the vectors' text_hash, and the maintenance after a publish
        (`published`: see maintain)."""
        names = {i.name for i in self.table.list_indices()}
        for name in names.intersection(UNUSED_INDEXES):
            self.table.drop_index(name)
        if self.vectors.count_rows() and "text_hash_idx" not in {i.name for i in self.vectors.list_indices()}:
            self.vectors.create_btree("text_hash", "text_hash_idx")
        if self.table.count_rows() and "unit_key_idx" not in names:
            self.table.create_btree("unit_key", "unit_key_idx")
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
        return self.table.to_lance().to_table(columns=["unit_key", "doc_id", "doc_version", "part", "acl",
                                                       "char_start", "char_end", "text_hash"])
