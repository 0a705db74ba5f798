"""Arrow tables handed to DuckDB's SQL by name, for as long as a block needs them."""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def registered(con, name: str, table):
    """An Arrow table that the connection's SQL can read as `name` until the block ends."""
    con.register(name, table)
    try:
        yield
    finally:
        con.unregister(name)
