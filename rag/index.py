"""The sub-chunk index: one LanceDB row per sub-chunk, keyed by unit version, ACL as a list column."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.index import BTree, IvfHnswSq, LabelList

from rag.embedding import DIMENSION

TABLE = "subchunks"
CACHE_TABLE = "vector_cache"
VECTOR_INDEX_MIN_ROWS = 50_000  # below this a flat scan answers in a few ms (STACK.md)
# Half precision halves the index (vectors dominate it) and changes cosine scores by ~1e-3.
VECTOR_TYPE = pa.float16()

SCHEMA = pa.schema([
    ("chunk_id", pa.string()), ("unit_key", pa.string()), ("unit_id", pa.string()),
    ("unit_version", pa.int32()), ("doc_id", pa.string()), ("doc_version", pa.string()),
    ("part", pa.int32()), ("acl", pa.list_(pa.string())), ("collection", pa.string()),
    ("char_start", pa.int32()), ("char_end", pa.int32()), ("tokens", pa.int32()),
    ("text_hash", pa.string()), ("vector", pa.list_(VECTOR_TYPE, DIMENSION)),
])
SEARCH_COLUMNS = ["unit_key", "unit_id", "doc_id", "doc_version", "part", "char_start", "char_end"]
CACHE_SCHEMA = pa.schema([("text_hash", pa.string()), ("vector", pa.list_(VECTOR_TYPE, DIMENSION))])
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
        self.uri = str(uri)
        self.db = lancedb.connect(self.uri)
        self.table = self._open(TABLE, SCHEMA)
        self.cache = self._open(CACHE_TABLE, CACHE_SCHEMA)

    def _open(self, name: str, schema: pa.Schema):
        if name in self.db.list_tables().tables:
            return self.db.open_table(name)
        return self.db.create_table(name, schema=schema)

    def as_of(self, version: int) -> "SubchunkIndex":
        """A read-only view of the table as a past publish left it (LanceDB keeps old versions until cleanup)."""
        view = SubchunkIndex(self.uri)
        try:
            view.table.checkout(version)
        except Exception as err:  # lance raises several types for a cleaned-up or unknown version
            raise LookupError(f"{self.uri}: table version {version} is no longer available ({err})") from None
        return view

    @property
    def version(self) -> int:
        return self.table.version

    def count(self) -> int:
        return self.table.count_rows()

    def unit_keys(self) -> set[str]:
        col = self.table.to_lance().to_table(columns=["unit_key"]).column("unit_key")
        return set(pc.unique(col).to_pylist())

    def cached_vectors(self, hashes: list[str]) -> dict[str, np.ndarray]:
        """Vectors already computed for these texts, from the live rows or from the cache of removed rows."""
        wanted = pa.array(sorted(set(hashes)), pa.string())
        found: dict[str, np.ndarray] = {}
        for tbl in (self.table, self.cache):
            if not len(wanted) or tbl.count_rows() == 0:
                continue
            data = tbl.to_lance().to_table(columns=["text_hash", "vector"],
                                           filter=pc.is_in(pc.field("text_hash"), wanted))
            vecs = _matrix(data.column("vector"))
            for h, v in zip(data.column("text_hash").to_pylist(), vecs):
                found.setdefault(h, v)
            wanted = pa.array([h for h in wanted.to_pylist() if h not in found], pa.string())
        return found

    def add(self, rows: list[SubchunkRow], vectors: np.ndarray) -> None:
        if not rows:
            return
        cols = {name: [getattr(r, name) for r in rows] for name in SCHEMA.names if name != "vector"}
        cols["acl"] = [list(a) for a in cols["acl"]]
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float16).ravel())
        cols["vector"] = pa.FixedSizeListArray.from_arrays(flat, DIMENSION)
        self.table.add(pa.table(cols, schema=SCHEMA))

    def remove_units(self, unit_keys: set[str]) -> int:
        """Delete the rows of these unit versions, keeping their vectors in the cache for re-use."""
        if not unit_keys:
            return 0
        keys = pa.array(sorted(unit_keys), pa.string())
        gone = self.table.to_lance().to_table(columns=["text_hash", "vector"],
                                              filter=pc.is_in(pc.field("unit_key"), keys))
        if gone.num_rows:
            _, first = np.unique(np.asarray(gone.column("text_hash").to_pylist(), dtype=object), return_index=True)
            (self.cache.merge_insert("text_hash").when_not_matched_insert_all()
             .execute(gone.take(pa.array(first))))
        self.table.delete(f"unit_key IN ({_sql_list(unit_keys)})")
        return gone.num_rows

    def search(self, vector: np.ndarray, groups: list[str], limit: int, unit_keys: list[str] | None = None) -> pa.Table:
        """Nearest sub-chunks among rows whose ACL admits one of the groups (the pre-filter of rule 1)."""
        where = f"array_has_any(acl, [{_sql_list(groups)}])"
        if unit_keys is not None:
            where += f" AND unit_key IN ({_sql_list(unit_keys)})"
        return (self.table.search(np.asarray(vector, dtype=np.float32)).distance_type("cosine")
                .where(where, prefilter=True).limit(limit).select(SEARCH_COLUMNS + ["_distance"]).to_arrow())

    def ensure_indexes(self) -> None:
        """Label-list index on acl for the pre-filter; a vector index once a flat scan gets slow."""
        names = {i.name for i in self.table.list_indices()}
        rows = self.table.count_rows()
        if rows and "acl_idx" not in names:
            self.table.create_index("acl", config=LabelList(), name="acl_idx")
        if rows and "unit_key_idx" not in names:
            self.table.create_index("unit_key", config=BTree(), name="unit_key_idx")
        if rows >= VECTOR_INDEX_MIN_ROWS and "vector_idx" not in names:
            self.table.create_index("vector", config=IvfHnswSq(distance_type="cosine"), name="vector_idx")
        elif names:
            self.table.optimize()

    def bytes_on_disk(self) -> int:
        return sum(p.stat().st_size for p in Path(self.uri).rglob("*") if p.is_file())

    def store_id(self) -> str | None:
        """The catalog identity this index was built for (None: never claimed)."""
        if IDENTITY_TABLE not in self.db.list_tables().tables:
            return None
        ids = self.db.open_table(IDENTITY_TABLE).to_arrow().column("store_id").to_pylist()
        return ids[0] if ids else None

    def claim(self, store_id: str) -> None:
        """Record which catalog this index now belongs to (after its foreign rows were removed)."""
        self.db.create_table(IDENTITY_TABLE, pa.table({"store_id": [store_id]}, schema=IDENTITY_SCHEMA),
                             mode="overwrite")

    def row_facts(self) -> pa.Table:
        """What the consistency checks compare with the catalog, for every row."""
        return self.table.to_lance().to_table(columns=["unit_key", "doc_id", "doc_version", "part", "acl",
                                                       "char_start", "char_end", "text_hash"])


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    if column.num_chunks == 0:
        return np.zeros((0, DIMENSION), dtype=np.float32)
    return column.combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(-1, DIMENSION).astype(np.float32)


def _sql_list(values) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in sorted(values))
