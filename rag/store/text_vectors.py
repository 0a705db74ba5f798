"""Vectors by text hash: one int8 row per embedded text, shared by every sub-chunk row that holds the text.

Sub-chunk rows are keyed by document version, so only a new or changed member writes rows; with each vector held
here once, those rows cost their ~100 bytes and only a text never embedded adds a vector. A vector
stays while a row holds its text and for the as-of retention after the last one left (a document put back within
it is not re-embedded, and a read of any version within it finds every vector it needs).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag.store.lance_folder import zstd_field

VECTORS_TABLE = "vectors"
DEPARTED_TABLE = "departed_texts"
DEPARTED_SCHEMA = pa.schema([zstd_field("text_hash", pa.string()), ("left_at", pa.timestamp("us"))])


def vectors_schema(dimension: int, embedder: str) -> pa.Schema:
    # int8: each row scaled so its largest component is ±127; every read scales rows to unit length (cosine ignores
    # scale), so no scale is stored: a quarter of float32.
    return pa.schema([zstd_field("text_hash", pa.string()), ("vector", pa.list_(pa.int8(), dimension))],
                     metadata={"embedder": embedder})


def vector_array(vectors: np.ndarray, list_type: pa.FixedSizeListType) -> pa.FixedSizeListArray:
    """Vectors as a column of this list type: int8 rows scaled so their largest component is ±127 (a row that was
    quantised so already comes back unchanged), float rows cast."""
    values = np.asarray(vectors, dtype=np.float32)
    if pa.types.is_integer(list_type.value_type):
        peak = np.maximum(np.abs(values).max(axis=1, keepdims=True, initial=0.0), 1e-12)
        values = np.rint(values * (127.0 / peak))
    flat = np.ascontiguousarray(values, dtype=list_type.value_type.to_pandas_dtype()).ravel()
    return pa.FixedSizeListArray.from_arrays(pa.array(flat), list_type.list_size)


def matrix(column: pa.ChunkedArray | pa.Array, dimension: int) -> np.ndarray:
    """A vector column (any numeric type) as float32 rows."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 0:
            return np.zeros((0, dimension), dtype=np.float32)
        column = column.combine_chunks()
    return column.flatten().to_numpy(zero_copy_only=False).reshape(-1, dimension).astype(np.float32)


def aligned(table, hashes: pa.Array) -> pa.Array:
    """The stored vector of each of these text hashes, in their order (a hash may repeat)."""
    dataset = table.to_lance()
    wanted = pc.unique(hashes)
    if len(wanted) * 4 < dataset.count_rows():
        found = dataset.to_table(columns=["text_hash", "vector"], filter=pc.is_in(pc.field("text_hash"), wanted))
    else:
        found = dataset.to_table(columns=["text_hash", "vector"])
    at = pc.index_in(hashes, value_set=found.column("text_hash").combine_chunks())
    if at.null_count:
        raise LookupError(f"{at.null_count} sub-chunk rows have no stored vector (vectors past the as-of retention?)")
    return found.column("vector").combine_chunks().take(at)


def by_hash(table, hashes: list[str]) -> dict[str, np.ndarray]:
    """The stored vectors of those of these texts that have one."""
    if not hashes or table.count_rows() == 0:
        return {}
    wanted = pa.array(sorted(set(hashes)), pa.string())
    found = table.to_lance().to_table(columns=["text_hash", "vector"], filter=pc.is_in(pc.field("text_hash"), wanted))
    dimension = table.schema.field("vector").type.list_size
    return dict(zip(found.column("text_hash").to_pylist(), matrix(found.column("vector"), dimension)))


def append_new(table, hashes: list[str], vectors: np.ndarray) -> int:
    """Store the vectors of the texts the table does not hold yet (each once); how many were added."""
    first = dict(zip(hashes, range(len(hashes))))
    new = sorted(set(first) - set(by_hash(table, list(first))))
    if new:
        rows = np.stack([vectors[first[h]] for h in new])
        table.add(pa.table({"text_hash": new, "vector": vector_array(rows, table.schema.field("vector").type)},
                           schema=table.schema))
    return len(new)


def mark_departed(departed, hashes: list[str]) -> None:
    """Record that no row holds these texts any more, from now."""
    if hashes:
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        departed.add(pa.table({"text_hash": hashes, "left_at": [now] * len(hashes)}, schema=DEPARTED_SCHEMA))


def expire(vectors, departed, rows, retention: timedelta) -> int:
    """Drop the vectors of texts that left longer than the retention ago and did not come back; how many."""
    cutoff = (datetime.now(timezone.utc) - retention).replace(tzinfo=None)
    old = f"left_at < TIMESTAMP '{cutoff:%Y-%m-%d %H:%M:%S.%f}'"
    if not departed.count_rows(old):
        return 0  # a delete of nothing would still write a table version
    marks = departed.to_lance().to_table(columns=["text_hash", "left_at"])
    is_old = pc.less(marks.column("left_at"), pa.scalar(cutoff, pa.timestamp("us")))
    gone = set(pc.filter(marks.column("text_hash"), is_old).to_pylist()) - set(
        pc.filter(marks.column("text_hash"), pc.invert(is_old)).to_pylist())
    if gone:
        held = rows.to_lance().to_table(columns=["text_hash"], filter=pc.is_in(
            pc.field("text_hash"), pa.array(sorted(gone), pa.string()))).column("text_hash").to_pylist()
        gone -= set(held)
    if gone:
        vectors.delete(f"text_hash IN ({sql_list(gone)})")
    departed.delete(old)
    return len(gone)


def sql_list(values) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in sorted(values))
