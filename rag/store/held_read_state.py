"""A reader's catalog tables held in memory per published store, patched by each newer publish's segments, or
written once per published store as a database file that every reader of a host opens read-only.

`load_read_state` builds every table from all its segments: the whole corpus, at every publish, in every worker.
Here one in-memory database per store holds the tables of the newest manifest the process opened. A newer
manifest whose segment lists extend the held ones applies only the appended segments (the keys they touch are
deleted, their newest live rows inserted), so a reader's open costs in proportion to the change; a keyless table
(rejected inputs, the store's identity: a few rows) is read again whole. Each snapshot reads through its own cursor,
pinned to a transaction begun right after its manifest was applied: DuckDB's MVCC keeps what it sees fixed while
later publishes patch the tables. Anything else (merged segments, a new column, an older manifest) is built in full. Deleted rows keep their memory until
the database is rebuilt, once they reach `DEAD_SHARE` of the live ones, so memory stays flat across publishes.
A workspace's reader (rag.query.workspace) asks for the shared file instead: the first reader of a manifest builds
the tables and writes them under a lock through a renamed temporary file; every other worker opens the file
read-only, and DuckDB reads only the blocks its queries touch, so the workers of a host do not each hold the whole
catalog. A publish's file is the previous publish's, copied and patched with the appended segments as above (each
file records the segments it holds); built whole only where a held state would be.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
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
    quote,
    read_manifest,
    sql_files,
    texts_query,
)
from rag.store.snapshot_repair import whole_parquet

DEAD_SHARE = 0.25
KEPT_FILES = 3  # shared table files kept: the snapshot served, the one swapped in, one more for a slow reader
RECORD = "_held_record"  # in a shared file: the manifest's segments it holds and their identity, to patch a copy of it
_GUARD = threading.Lock()  # one patch at a time; a snapshot's cursor is pinned before the next patch starts


class HeldState:
    """One store's tables as of manifest `seq`, in an in-memory database that cursors read (kept alive by them)."""

    def __init__(self, tables: dict[str, list[str]], seq: int, con: duckdb.DuckDBPyConnection | None = None):
        self.con = con if con is not None else duckdb.connect(":memory:")
        self.seq, self.tables, self.live, self.dead = seq, {}, 0, 0
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
        (rows,), = self.con.execute(f"SELECT count(*) FROM {name}").fetchall()
        self.live += rows

    def patchable(self, tables: dict[str, list[str]]) -> bool:
        """Whether every keyed table of a newer manifest extends the held one's segments."""
        for table, files in tables.items():
            held = self.tables.get(table)
            if table == "texts":
                continue
            if held is None or (READ_TABLES[table] and files[:len(held)] != held):
                return False
        return self.same_files() and set(tables) >= set(self.tables) and self.dead < DEAD_SHARE * max(self.live, 1)

    def same_files(self) -> bool:
        """Whether every held segment is still the file it was built from (not a re-created store's namesake)."""
        return all(_stamp(f) == stamp for f, stamp in self.stamps.items())

    def patch(self, tables: dict[str, list[str]], seq: int) -> None:
        """Apply the segments each table gained since the held manifest, all in one transaction."""
        self.con.execute("BEGIN")
        try:
            for table, files in tables.items():
                added = files[len(self.tables[table]):]
                if table == "texts":
                    continue
                if not READ_TABLES[table] and files != self.tables[table]:
                    self._reread(table, files)
                elif added:
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

    def _reread(self, table: str, files: list[str]) -> None:
        """A keyless table (rejected inputs, the store's identity: rows without a key to patch by), read again."""
        name = held_name(table)
        (deleted,), = self.con.execute(f"DELETE FROM {name}").fetchall()
        (inserted,), = self.con.execute(f"INSERT INTO {name} BY NAME {live_rows(table, files)}").fetchall()
        for f in self.tables[table]:
            self.stamps.pop(f, None)
        self.stamps.update((f, _stamp(f)) for f in files)
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


def open_held(manifest: Path, shared: Path | None = None) -> tuple[duckdb.DuckDBPyConnection, HeldState | None]:
    """A connection reading this manifest's tables as a reader sees them, and the state its holder must keep.

    The store's held state is patched when the manifest is newer than it and extends it, rebuilt otherwise; a
    manifest older than the held one gets a state of its own. With a `shared` folder, the tables are written there
    once as a database file that every reader of the host opens read-only (no state to keep)."""
    tables = read_manifest(manifest)
    tables.setdefault("texts", [])
    for text_file in tables["texts"]:   # read lazily, at a query: a damaged one is refused here, in one line
        if not whole_parquet(Path(text_file)):
            raise ValueError(f"text file {SEGMENT_DIR}/{Path(text_file).name} is lost or damaged; the next ingest "
                             "reads its texts again from the sources")
    if shared is None:
        return _held(manifest, tables)
    found = shared / f"catalog-{_digest(tables)}.duckdb"
    if not found.exists():
        try:
            _write_shared(manifest, tables, found)
        except (OSError, duckdb.Error):  # a read-only or full folder: this reader holds its own tables
            return _held(manifest, tables)
    try:
        con = duckdb.connect(str(found), read_only=True)
    except duckdb.Error:  # removed since (a newer publish's files replaced it): this reader holds its own
        return _held(manifest, tables)
    con.execute(f"CREATE TEMP VIEW texts AS {texts_query(tables['texts'])}")
    con.execute(f"CREATE TEMP VIEW documents AS {documents_view()}")
    return con, None


def _held(manifest: Path, tables: dict[str, list[str]]) -> tuple[duckdb.DuckDBPyConnection, HeldState]:
    key, seq = str(Path(manifest).parent.resolve()), int(Path(manifest).stem)
    with _GUARD:
        held = _HELD.get(key)
        if held is not None and seq < held.seq:
            held = HeldState(tables, seq)
        elif held is not None and seq > held.seq and held.patchable(tables) and _patched(held, tables, seq):
            pass
        elif held is None or seq != held.seq or held.tables != tables or not held.same_files():
            held = _HELD[key] = HeldState(tables, seq)
        return held.pinned(tables["texts"]), held


def _digest(tables: dict[str, list[str]]) -> str:
    """A name for these tables: their segments and each one's file identity (a store made anew reuses names)."""
    stamps = {f: _stamp(f) for files in tables.values() for f in files}
    return hashlib.sha256(json.dumps([sorted(tables.items()), sorted(stamps.items())]).encode()).hexdigest()[:24]


def _write_shared(manifest: Path, tables: dict[str, list[str]], found: Path) -> None:
    """Build (or patch) the held tables and write them to `found` through a renamed temporary file, one writer at
    a time; the other readers wait for it. Only the newest KEPT_FILES such files stay."""
    found.parent.mkdir(parents=True, exist_ok=True)
    with open(found.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found.exists():
            return
        tmp = found.with_name(f".{found.stem}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        try:
            if not _patched_copy(found.parent, tables, int(Path(manifest).stem), tmp):
                _built_copy(manifest, tables, tmp)
            os.rename(tmp, found)
        finally:
            tmp.unlink(missing_ok=True)
    older = _shared_files(found.parent)[:-KEPT_FILES]
    for old in older:
        old.unlink(missing_ok=True)
        old.with_suffix(".lock").unlink(missing_ok=True)


def _shared_files(folder: Path) -> list[Path]:
    """The shared table files in the folder, oldest first."""
    return sorted(folder.glob("catalog-*.duckdb"), key=lambda p: p.stat().st_mtime_ns)


def _patched_copy(folder: Path, tables: dict[str, list[str]], seq: int, tmp: Path) -> bool:
    """Write to `tmp` a copy of the newest shared file, patched with the segments the manifest appended to the ones
    it holds; False (nothing left at `tmp`) when there is none, or it cannot be patched so."""
    try:
        shutil.copyfile(_shared_files(folder)[-1], tmp)
        con = duckdb.connect(str(tmp))
    except (IndexError, OSError, duckdb.Error):  # none yet, or pruned since
        tmp.unlink(missing_ok=True)
        return False
    done = False
    try:
        held = _recorded(con)
        done = held is not None and seq > held.seq and held.patchable(tables) and _patched(held, tables, seq)
        if done:
            _record(held, "main", held.dead)
            con.execute("CHECKPOINT")
    finally:
        con.close()
        if not done:
            tmp.unlink(missing_ok=True)
    return done


def _built_copy(manifest: Path, tables: dict[str, list[str]], tmp: Path) -> None:
    """Write to `tmp` the manifest's tables, built (or patched in this process's held state) and copied whole."""
    con, held = _held(manifest, tables)
    try:
        held.con.execute(f"ATTACH '{quote(str(tmp))}' AS shared_copy")
        held.con.execute("COPY FROM DATABASE memory TO shared_copy")
        _record(held, "shared_copy", 0)  # a copy holds the live rows alone
        held.con.execute("DETACH shared_copy")
    finally:
        con.close()


def _record(held: HeldState, database: str, dead: int) -> None:
    """Record in the database which segments its tables hold and how many rows it keeps deleted (what a later
    publish's copy is patched from, or built anew once they pile up)."""
    held.con.execute(f"CREATE OR REPLACE TABLE {database}.{RECORD} AS SELECT ? AS tables, ? AS stamps, "
                     "?::BIGINT AS live, ?::BIGINT AS dead, ?::BIGINT AS seq",
                     [json.dumps(held.tables), json.dumps(held.stamps), held.live, dead, held.seq])


def _recorded(con: duckdb.DuckDBPyConnection) -> HeldState | None:
    """The held state a shared file's database records (None: a file without the record)."""
    try:
        (tables, stamps, live, dead, seq), = con.execute(f"SELECT tables, stamps, live, dead, seq FROM {RECORD}"
                                                        ).fetchall()
    except duckdb.Error:
        return None
    held = HeldState({}, seq, con)
    held.tables, held.live, held.dead = json.loads(tables), live, dead
    held.stamps = {f: tuple(s) if s is not None else None for f, s in json.loads(stamps).items()}
    return held


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
