"""A reader's catalog tables held in memory per published store, patched by each newer publish's segments.

`load_read_state` builds every table from all its segments: the whole corpus, at every publish, in every worker.
Here one in-memory database per store holds the tables of the newest manifest the process opened. A newer
manifest whose segment lists extend the held ones applies only the appended segments (the keys they touch are
deleted, their newest live rows inserted), so a reader's open costs in proportion to the change. Each snapshot
reads through its own cursor, pinned to a transaction begun right after its manifest was applied: DuckDB's MVCC
keeps what it sees fixed while later publishes patch the tables. Anything else (merged segments, a new column, a
keyless table that changed, an older manifest) is built in full, as before. Deleted rows keep their memory until
the database is rebuilt, once they reach `DEAD_SHARE` of the live ones, so memory stays flat across publishes.
"""
from __future__ import annotations

import threading
import weakref
from pathlib import Path

import duckdb

from rag.store.snapshot_files import (
    MARKERS,
    READ_TABLES,
    SEGMENT_DIR,
    documents_view,
    held_name,
    live_rows,
    newest_rows,
    read_manifest,
    sql_files,
    texts_query,
)
from rag.store.snapshot_repair import whole_parquet

DEAD_SHARE = 0.25
_GUARD = threading.Lock()  # one patch at a time; a snapshot's cursor is pinned before the next patch starts


class HeldState:
    """One store's tables as of manifest `seq`, in an in-memory database that cursors read (kept alive by them)."""

    def __init__(self, tables: dict[str, list[str]], seq: int):
        self.con = duckdb.connect(":memory:")
        self.seq, self.tables, self.live, self.dead = seq, {}, 0, 0
        self.columns: dict[str, set[str]] = {}
        self.stamps: dict[str, tuple[int, int] | None] = {}  # segment → (inode, mtime): a store made anew reuses names
        for table, files in tables.items():
            self._build_table(table, files)

    def _build_table(self, table: str, files: list[str]) -> None:
        """The table as the newest live row per key over all its segments (the texts stay in their files)."""
        self.tables[table] = files
        if table == "texts":
            return
        self.stamps.update((f, _stamp(f)) for f in files)
        name = held_name(table)
        self.con.execute(f"DROP TABLE IF EXISTS {name}")
        self.con.execute(f"CREATE TABLE {name} AS {live_rows(table, files)}")
        self.columns[table] = {c for (c, *_) in self.con.execute(f"DESCRIBE {name}").fetchall()}
        (rows,), = self.con.execute(f"SELECT count(*) FROM {name}").fetchall()
        self.live += rows

    def patchable(self, tables: dict[str, list[str]]) -> bool:
        """Whether every table of a newer manifest extends the held one's segments (keyless ones unchanged)."""
        for table, files in tables.items():
            held = self.tables.get(table)
            if table == "texts":
                continue
            if held is None or files[:len(held)] != held or (not READ_TABLES[table] and files != held):
                return False
        return self.same_files() and set(tables) >= set(self.tables) and self.dead < DEAD_SHARE * max(self.live, 1)

    def same_files(self) -> bool:
        """Whether every held segment is still the file it was built from (not a re-created store's namesake)."""
        return all(_stamp(f) == stamp for f, stamp in self.stamps.items())

    def _new_columns_held(self, table: str, files: list[str]) -> bool:
        found = self.con.execute(f"DESCRIBE SELECT * FROM read_parquet([{sql_files(files)}], union_by_name = true)")
        return {c for (c, *_) in found.fetchall()} - set(MARKERS) <= self.columns[table]

    def patch(self, tables: dict[str, list[str]], seq: int) -> None:
        """Apply the segments each table gained since the held manifest, all in one transaction."""
        self.con.execute("BEGIN")
        try:
            for table, files in tables.items():
                added = files[len(self.tables[table]):]
                if table != "texts" and added:
                    self._apply(table, added)
                    self.stamps.update((f, _stamp(f)) for f in added)
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")
        self.tables, self.seq = dict(tables), seq

    def _apply(self, table: str, added: list[str]) -> None:
        name, key = held_name(table), READ_TABLES[table]
        # one segment holds one row per key; a new column fails the insert below, and the state is built anew
        rows = (f"SELECT * FROM read_parquet([{sql_files(added)}])" if len(added) == 1
                else newest_rows(added, ", ".join(key)))
        self.con.execute(f"CREATE OR REPLACE TEMP TABLE _delta AS {rows}")
        match = " AND ".join(f"{name}.{k} = _delta.{k}" for k in key)
        (deleted,), = self.con.execute(f"DELETE FROM {name} USING _delta WHERE {match}").fetchall()
        (inserted,), = self.con.execute(f"INSERT INTO {name} BY NAME SELECT COLUMNS(lambda c: c NOT IN "
                                        f"{MARKERS}) FROM _delta WHERE NOT _gone").fetchall()
        self.con.execute("DROP TABLE _delta")
        self.dead += deleted
        self.live += inserted - deleted

    def pinned(self, texts: list[str]) -> duckdb.DuckDBPyConnection:
        """A cursor that reads the tables as they are now for as long as it is open, with the manifest's texts."""
        cur = self.con.cursor()
        cur.execute("BEGIN TRANSACTION")
        cur.execute("SELECT count(*) FROM doc_rows").fetchall()  # starts (pins) the transaction's view of the tables
        cur.execute(f"CREATE TEMP VIEW texts AS {texts_query(texts)}")
        cur.execute(f"CREATE TEMP VIEW documents AS {documents_view()}")
        return cur


_HELD: "weakref.WeakValueDictionary[str, HeldState]" = weakref.WeakValueDictionary()


def open_held(manifest: Path) -> tuple[duckdb.DuckDBPyConnection, HeldState]:
    """A connection reading this manifest's tables as a reader sees them, and the state its holder must keep.

    The store's held state is patched when the manifest is newer than it and extends it, rebuilt otherwise; a
    manifest older than the held one gets a state of its own."""
    key, seq = str(Path(manifest).parent.resolve()), int(Path(manifest).stem)
    tables = read_manifest(manifest)
    tables.setdefault("texts", [])
    for text_file in tables["texts"]:   # read lazily, at a query: a damaged one is refused here, in one line
        if not whole_parquet(Path(text_file)):
            raise ValueError(f"text file {SEGMENT_DIR}/{Path(text_file).name} is lost or damaged; the next ingest "
                             "reads its texts again from the sources")
    with _GUARD:
        held = _HELD.get(key)
        if held is not None and seq < held.seq:
            held = HeldState(tables, seq)
        elif held is not None and seq > held.seq and held.patchable(tables) and _patched(held, tables, seq):
            pass
        elif held is None or seq != held.seq or held.tables != tables or not held.same_files():
            held = _HELD[key] = HeldState(tables, seq)
        return held.pinned(tables["texts"]), held


def _patched(held: HeldState, tables: dict[str, list[str]], seq: int) -> bool:
    """Patch the held state; False (it is left as it was) when the new segments do not fit its tables."""
    try:
        held.patch(tables, seq)
    except duckdb.Error:
        return False
    return True


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        st = Path(path).stat()
    except FileNotFoundError:  # pruned since: the held state cannot be patched
        return None
    return st.st_ino, st.st_mtime_ns
