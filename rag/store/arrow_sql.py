"""Arrow tables handed to DuckDB's SQL by name, for as long as a block needs them."""
from __future__ import annotations

from contextlib import contextmanager

import pyarrow as pa


@contextmanager
def registered(con, name: str, table):
    """An Arrow table that the connection's SQL can read as `name` until the block ends."""
    con.register(name, table)
    try:
        yield
    finally:
        con.unregister(name)


def whole(values: pa.ChunkedArray | pa.Array) -> pa.Array:
    """An Arrow column as one array (a query's result comes in chunks)."""
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
