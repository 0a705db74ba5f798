"""The writer's catalog file rewritten without its free blocks, once they are a large share of it.

DuckDB reuses the blocks a checkpoint frees but never returns them to the file system, so re-publishes leave the
catalog a growing share of free blocks. A copy costs the used blocks and is made only once the free ones reach
`FREE_SHARE` of them, so, amortised, a run writes in proportion to the blocks it freed, i.e. to its change.
Checkpoints also leave used blocks partly empty, which no free-block count shows (2Wiki after five 10% re-publishes:
2.67 MB with 16 KB free; 2.29 MB under this rule, bench/storage.py): so a file is copied as well once it has grown
by `GROWTH_SHARE` since its last copy (recorded beside it), which again costs, amortised, a share of what runs added.
Readers never open this file (they read the published segments), and the writer copies it while it holds the
workspace's lock, once no other writer connection of its process has it open.
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import duckdb

from rag.store.schema import BLOCK_SIZE
from rag.store.snapshot_files import fsync, quote

FREE_SHARE = 0.25
GROWTH_SHARE = 0.2
MIN_BLOCKS = 64  # a smaller file (1 MiB) is not worth copying for its partly empty blocks
# The store of record is never guessed at: a lost catalog is rebuilt from the sources, so that is the way out.
DAMAGED_HINT = "; if the file is damaged, move it away and run the ingest again to rebuild it from the sources"
_OPEN: dict[str, int] = {}  # catalog file → writer connections of this process that have it open
_GUARD = threading.Lock()


def connect_writer(path: Path) -> duckdb.DuckDBPyConnection:
    """The writer's connection (a new file gets `BLOCK_SIZE` blocks), counted until `close_connection`."""
    con = duckdb.connect(str(path), config={"default_block_size": str(BLOCK_SIZE)})
    key = str(Path(path).resolve())
    with _GUARD:
        _OPEN[key] = _OPEN.get(key, 0) + 1
    return con


def last_closing(path: Path) -> bool:
    """Count a writer connection closing; whether it was the last one of this process on the file."""
    key = str(Path(path).resolve())
    with _GUARD:
        _OPEN[key] = _OPEN.get(key, 1) - 1
        if _OPEN[key] > 0:
            return False
        del _OPEN[key]
        return True


def close_connection(con: duckdb.DuckDBPyConnection, path: Path, writer: bool) -> None:
    """Close; the last writer connection of the process on the file compacts it if mostly free, unless an error
    is on its way out (a failed step's catalog is closed as it is)."""
    if writer and last_closing(path) and sys.exc_info()[1] is None and (sparse(con) or grown(con, path)):
        con.execute("CHECKPOINT")
        compact(con, path)
    else:
        con.close()


def blocks(con: duckdb.DuckDBPyConnection, database: str | None = None) -> tuple[int, int, int]:
    """(total, used, free) blocks of the database's file (the connection's current one by default)."""
    (size,) = con.execute("SELECT total_blocks, used_blocks, free_blocks FROM pragma_database_size() "
                          "WHERE database_name = coalesce(?, current_database())", [database]).fetchall()
    return size


def sparse(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the file's free blocks reach `FREE_SHARE` of its used ones."""
    _, used, free = blocks(con)
    return free >= FREE_SHARE * max(used, 1)


def grown(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Whether the file (past `MIN_BLOCKS`) has grown by `GROWTH_SHARE` since its last copy (ever, if none is
    recorded)."""
    total = blocks(con)[0]
    return total >= MIN_BLOCKS and total >= (1 + GROWTH_SHARE) * compacted_blocks(path)


def compacted_blocks(path: Path) -> int:
    """The file's blocks right after its last copy (0: none recorded)."""
    try:
        return int(blocks_file(path).read_text())
    except (FileNotFoundError, ValueError):
        return 0


def blocks_file(path: Path) -> Path:
    return Path(f"{path}.compacted")


def compact(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Copy the committed catalog into a fresh file, close `con`, and put the copy in the file's place.

    A failed copy leaves the file as it was (the copy is dropped); `con` is closed either way.
    """
    tmp = path.with_name(f".{path.name}.compact")
    tmp.unlink(missing_ok=True)
    try:
        (name,), = con.execute("SELECT current_database()").fetchall()
        con.execute(f"ATTACH '{quote(str(tmp))}' AS _compact (BLOCK_SIZE {BLOCK_SIZE})")
        con.execute(f'COPY FROM DATABASE "{name}" TO _compact')
        con.execute("CHECKPOINT _compact")
        total = blocks(con, "_compact")[0]
        con.execute("DETACH _compact")
    except duckdb.Error:
        con.close()
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
        raise
    con.close()
    fsync(tmp)
    Path(f"{path}.wal").unlink(missing_ok=True)  # the copy holds every commit; an old log must not replay on it
    os.replace(tmp, path)
    record = blocks_file(path).with_name(f".{blocks_file(path).name}.tmp")
    record.write_text(str(total))
    os.replace(record, blocks_file(path))
