"""The catalog: a DuckDB file holding every document version, units, membership, publish log, quarantine (the
documents' and source files' reads and writes are in rag.store.catalog_documents)."""
from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa

from rag.sources.documents import Rejected
from rag.store.arrow_sql import registered
from rag.store.catalog_documents import DocumentTables
from rag.store.catalog_file import DAMAGED_HINT, close_connection, connect_writer
from rag.store.catalog_unit_reads import UnitReads, split_keys
from rag.store.held_read_state import HeldState, open_held
from rag.store.rows import UnitChanges, UnitEvent, VersionEvent
from rag.store.schema import SCHEMA, SETTINGS_SCHEMA, drop_primary_keys, narrow_fact_ids, unit_key_sql
from rag.store.settings import as_of_retention
from rag.store.snapshot_files import SnapshotInfo, publish_snapshot
from rag.store.snapshot_repair import repair_published
from rag.store.text_store import VIEW, TextStore
from rag.store.writer_lock import WriterLock
from rag.units.long_units import Unit, UnitPlan, unit_key


def utc_now() -> datetime:
    """The catalog's clock: naive UTC, as DuckDB's TIMESTAMP columns hold it."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


class CatalogError(RuntimeError):
    """The catalog file cannot be opened (not a DuckDB file, a folder, unreadable)."""


class Catalog(DocumentTables, UnitReads):
    """The writer's catalog (holding the workspace's writer lock), or a read-only published snapshot of it.

    `path` is always the workspace's `catalog.duckdb`, so caches keyed by it survive new snapshots;
    `file` is what this connection reads; `texts` is the writer's text store (None for a reader).
    """

    texts: TextStore | None = None
    _held: HeldState | None = None  # a reader's tables, kept alive while its cursor reads them

    def __init__(self, path: str | Path, *, snapshot: Path | None = None, entry: str = "rag",
                 wait_s: float | None = None, shared: Path | None = None):
        self.path = str(path)
        self.file = str(snapshot or path)
        self.read_only = snapshot is not None
        self._shared = shared
        self._lock = threading.Lock()  # one DuckDB connection serves every thread of a reader
        self._writer = None
        if not self.read_only:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._writer = WriterLock(Path(path).parent, entry, wait_s)
            self._writer.acquire()
        try:
            if not self.read_only:
                self.con = connect_writer(Path(self.file))
            else:
                self.con, self._held = self._connect_reader()
        except (duckdb.Error, OSError, ValueError, KeyError) as err:
            self._release()
            raise CatalogError(f"{self.file}: cannot open the catalog ({str(err).splitlines()[0]})"
                               f"{'' if self.read_only else DAMAGED_HINT}") from None
        try:
            if not self.read_only:
                self.con.execute(SCHEMA)
                self.texts = TextStore(self.con, Path(path).parent).opened()
                drop_primary_keys(self.con)  # after the texts moved out; the views bind by name at each query
                narrow_fact_ids(self.con)
                repair_published(self.con, self.path)
        except (duckdb.Error, OSError, ValueError, KeyError) as err:
            self.close()  # an error is on its way out: no compaction
            raise CatalogError(f"{self.file}: cannot open the catalog ({str(err).splitlines()[0]})"
                               f"{'' if self.read_only else DAMAGED_HINT}") from None

    def _connect_reader(self) -> tuple[duckdb.DuckDBPyConnection, HeldState | None]:
        if self.file.endswith(".json"):  # the store's tables held in memory, patched by each publish
            return open_held(Path(self.file), self._shared)
        return duckdb.connect(self.file, read_only=True), None  # a whole-catalog copy (the format before segments)

    def reopen(self) -> None:
        """A reader's connection to a database file closed and opened again: what DuckDB kept of a read-state build
        (its buffer pool, its allocator's pages: 150 MB at 1M sub-chunks) goes back to the system."""
        if not self.read_only or self._held is not None:  # the writer's, or tables this process holds in memory
            return
        with self._lock:
            self.con.close()  # first: a second connection to the file would share the first one's database
            self.con, self._held = self._connect_reader()

    @classmethod
    def snapshot(cls, workspace: str | Path, info: SnapshotInfo, shared: Path | None = None) -> "Catalog":
        """A read-only connection to a published snapshot, never taking the writer's lock (`shared`: open_held's)."""
        return cls(Path(workspace) / "catalog.duckdb", snapshot=info.path(workspace), shared=shared)

    @property
    def with_texts(self) -> str:
        """Where documents are read with their texts: the writer's view joining the text files, or a reader's."""
        return VIEW if self.texts is not None else "documents"

    def close(self) -> None:
        """Close; a writer's connection may compact the file (rag.store.catalog_file.close_connection)."""
        try:
            close_connection(self.con, Path(self.file), writer=self._writer is not None)
        finally:
            self._held = None
            self._release()

    def _release(self) -> None:
        if self._writer:
            self._writer.release()
            self._writer = None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything written inside commits together or not at all."""
        self.con.execute("BEGIN")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def execute_many(self, sql: str, params: list[list]) -> None:
        if params:
            self.con.executemany(sql, params)

    def bulk_insert(self, table: str, columns: dict[str, list]) -> None:
        """Insert many rows at once through Arrow (executemany costs a statement per row)."""
        if columns and len(next(iter(columns.values()))):
            with registered(self.con, "_bulk_rows", pa.table(columns)):
                self.con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM _bulk_rows")

    def rewrite_changed(self, table: str, new: str, keys: tuple[str, ...], others: list[str], scope: str,
                        params: list | None = None) -> None:
        """Make `table`'s rows in `scope` (SQL over alias `t`) the rows of `new`, deleting and inserting only those
        that differ: an edit writes what it changed, not every row in scope."""
        same = " AND ".join([f"t.{c} = n.{c}" for c in keys] + [f"t.{c} IS NOT DISTINCT FROM n.{c}" for c in others])
        self.con.execute(f"DELETE FROM {table} t WHERE ({scope}) AND NOT EXISTS (SELECT 1 FROM {new} n WHERE {same})",
                         params or [])
        self.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {new} n WHERE NOT EXISTS "
                         f"(SELECT 1 FROM {table} t WHERE {same})")

    def rows(self, sql: str, params: list | None = None) -> list[tuple]:
        with self._lock:
            return self.con.execute(sql, params or []).fetchall()

    def columns(self, sql: str, params: list | None = None) -> pa.Table:
        """The result as Arrow columns: no Python object per row."""
        with self._lock:
            return self.con.sql(sql, params=params or None).to_arrow_table()

    def columns_over(self, sql: str, name: str, table: pa.Table) -> pa.Table:
        """columns() of SQL that reads an Arrow table as `name` (for this query alone)."""
        with self._lock, registered(self.con, name, table):
            return self.con.sql(sql).to_arrow_table()

    def publish_snapshot(self, publish_id: int, lance_version: int | None = None) -> SnapshotInfo:
        """Make the catalog's committed state the one readers see (see rag.store.snapshot_files)."""
        self.con.execute("CHECKPOINT")  # the write-ahead log folded into the file, so it never outgrows the change
        cutoff = utc_now() - as_of_retention()
        self.texts.expire(cutoff, self.published_history_sql(["content_hash"], f"valid_to >= TIMESTAMP '{cutoff}'"))
        info = publish_snapshot(self.con, self.path, publish_id, lance_version)
        self._drop_published_history()
        return info

    def _drop_published_history(self) -> None:
        """Drop, once the read state holds them, the rows only as-of reads and history need: unit versions that
        a newer one replaced (the newest of each unit stays, for numbering) and the members of every unit neither
        current nor pending; document versions no longer current that no source record names nor a remaining unit
        holds; and planning facts of versions no longer current (recomputed if one comes back).

        What the writer still needs of a dropped version (its label and hash for reconciling, its validity for the
        texts' retention) it reads from the read state (`published_versions`).
        """
        with self.transaction():
            self.con.execute("DELETE FROM units u WHERE status IN ('retired', 'abandoned') AND unit_version < "
                             "(SELECT max(unit_version) FROM units n WHERE n.unit_id = u.unit_id)")
            self.con.execute("DELETE FROM unit_members m WHERE NOT EXISTS (SELECT 1 FROM units u WHERE u.unit_id = "
                             "m.unit_id AND u.unit_version = m.unit_version AND u.status IN ('current', 'pending'))")
            self.con.execute("DELETE FROM documents d WHERE status <> 'current' AND NOT EXISTS (SELECT 1 FROM "
                             "source_records r WHERE r.doc_id = d.doc_id AND r.version = d.version) AND NOT EXISTS ("
                             "SELECT 1 FROM unit_members m WHERE m.doc_id = d.doc_id AND m.doc_version = d.version)")
            self.con.execute("DELETE FROM doc_facts f WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = "
                             "f.doc_id AND d.version = f.version AND d.status = 'current')")
            self.con.execute("DELETE FROM doc_mentions m WHERE NOT EXISTS (SELECT 1 FROM doc_facts f "
                             "WHERE f.fact_id = m.fact_id)")
            self.con.execute("DELETE FROM doc_parts p WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = "
                             "p.doc_id AND d.version = p.version AND d.status = 'current')")

    def begin_publish(self, sources: list[str]) -> int:
        (last,), = self.rows("SELECT coalesce(max(publish_id), 0) FROM publish_log")
        pid = last + 1
        self.con.execute("UPDATE publish_log SET status = 'interrupted' WHERE status = 'running'")
        self.con.execute("INSERT INTO publish_log (publish_id, started_at, status, sources) VALUES (?, ?, 'running', ?)",
                         [pid, utc_now(), sources])
        return pid

    def latest_publish(self) -> int:
        (pid,), = self.rows("SELECT coalesce(max(publish_id), 0) FROM publish_log")
        return pid

    def record_problems(self, publish_id: int, severity: str, problems: list[Rejected]) -> None:
        if problems:
            self.execute_many(
                "INSERT INTO quarantine VALUES (?, ?, ?, ?, ?, ?)",
                [[publish_id, severity, p.source_path, p.doc_id, p.reason, utc_now()] for p in problems])

    def quarantine(self, publish_id: int | None = None) -> list[tuple]:
        where, params = ("WHERE publish_id = ?", [publish_id]) if publish_id else ("", [])
        return self.rows(f"SELECT severity, source_path, doc_id, reason FROM quarantine {where} "
                         "ORDER BY source_path", params)

    def embedding_time(self) -> tuple[float, int]:
        """Seconds the publishes that embedded anything took, and the sub-chunks they embedded."""
        (seconds, embedded), = self.rows(
            "SELECT coalesce(sum(epoch(finished_at) - epoch(started_at)), 0), coalesce(sum(subchunks_embedded), 0) "
            "FROM publish_log WHERE status = 'published' AND subchunks_embedded > 0")
        return float(seconds), int(embedded)

    # units -----------------------------------------------------------------------------------------

    def stage_units(self, publish_id: int, plan: UnitPlan, inputs: str | None = None,
                    scope: list[str] | None = None) -> UnitChanges:
        """Write the plan's new or changed units as pending, visible at commit; `inputs` (`plan_inputs`) is kept.

        A plan of `scope`'s documents only replaces the current units that hold one of them."""
        current = self.current_units(scope)
        changes = UnitChanges()
        planned, changed = set(), []
        for unit in plan.units:
            planned.add(unit.unit_id)
            cur = current.get(unit.unit_id)
            if cur and cur[1] == unit.content_hash:
                changes.unchanged += 1
            else:
                changed.append(unit)
        with self.transaction():
            self.con.execute("UPDATE units SET status = 'abandoned' WHERE status = 'pending'")
            # the newest version of the changed units only (a retired unit's stays, for numbering)
            latest = dict(self.rows("SELECT unit_id, max(unit_version) FROM units WHERE unit_id IN (SELECT unnest(?)) "
                                    "GROUP BY unit_id", [[u.unit_id for u in changed]]))
            staged = [(unit, latest.get(unit.unit_id, 0) + 1) for unit in changed]
            for unit, version in staged:
                changes.published.append((unit.unit_id, version))
                if unit.unit_id in current:
                    changes.retired.append((unit.unit_id, current[unit.unit_id][0]))
            self._insert_units(publish_id, staged)
            changes.retired += [(u, v) for u, (v, _) in current.items() if u not in planned]
            # Only until the index step commits them (commit_units clears it): which unit a publish made is in
            # `units.publish_id`, so the log keeps no list of keys.
            self.con.execute("UPDATE publish_log SET units_retired = ?, plan_inputs = ? WHERE publish_id = ?",
                             [[unit_key(u, v) for u, v in changes.retired], inputs, publish_id])
        return changes

    def _insert_units(self, publish_id: int, staged: list[tuple[Unit, int]]) -> None:
        """The units as pending, with their members: two bulk inserts (a statement per unit made a large first
        build spend most of its time here)."""
        self.bulk_insert("units", {
            "unit_id": [u.unit_id for u, _ in staged], "unit_version": [v for _, v in staged],
            "acl": pa.array([list(u.acl) for u, _ in staged], pa.list_(pa.string())),
            "collection": pa.array([u.collection for u, _ in staged], pa.string()),
            "tokens": [u.tokens for u, _ in staged], "content_hash": [u.content_hash for u, _ in staged],
            "status": ["pending"] * len(staged), "publish_id": [publish_id] * len(staged)})
        members = [(u.unit_id, v, i, m) for u, v in staged for i, m in enumerate(u.members)]
        self.bulk_insert("unit_members", {
            "unit_id": [k for k, *_ in members], "unit_version": [v for _, v, _, _ in members],
            "position": [i for _, _, i, _ in members], "doc_id": [m.doc_id for *_, m in members],
            "doc_version": [m.doc_version for *_, m in members], "part": [m.part for *_, m in members],
            "char_start": [m.start for *_, m in members], "char_end": [m.end for *_, m in members],
            "tokens": [m.tokens for *_, m in members]})

    def commit_units(self, publish_id: int, lance_version: int, embedded: int) -> None:
        """Make the pending units current and retire the ones they replace, atomically."""
        (retired,), = self.rows("SELECT units_retired FROM publish_log WHERE publish_id = ?", [publish_id])
        ids, versions = split_keys(list(retired or []))
        now = utc_now()
        with self.transaction():
            self.con.execute("UPDATE units SET status = 'retired', valid_to = ? FROM (SELECT unnest(?::VARCHAR[]) AS "
                             "unit_id, unnest(?::INTEGER[]) AS unit_version) k WHERE units.unit_id = k.unit_id AND "
                             "units.unit_version = k.unit_version AND status = 'current'", [now, ids, versions])
            self.con.execute("UPDATE units SET status = 'current', valid_from = ? WHERE status = 'pending'", [now])
            self.con.execute(
                "UPDATE publish_log SET finished_at = ?, status = 'published', subchunks_embedded = ?, "
                "lance_version = ?, units_retired = NULL WHERE publish_id = ?",
                [now, embedded, lance_version, publish_id])

    def running_publish(self) -> int:
        """The publish a step belongs to: the latest still running, or a new one for a step run alone."""
        rows = self.rows("SELECT max(publish_id) FROM publish_log WHERE status = 'running'")
        return rows[0][0] or self.begin_publish([])

    def index_synced(self, publish_id: int, lance_version: int) -> None:
        """Record the index version this publish left, whose rows are exactly its current units' members."""
        self.con.execute("UPDATE publish_log SET lance_version = ?, index_synced = true WHERE publish_id = ?",
                         [lance_version, publish_id])

    def finish_failed(self, publish_id: int) -> None:
        self.con.execute("UPDATE publish_log SET status = 'failed', finished_at = ? WHERE publish_id = ?",
                         [utc_now(), publish_id])

    def publish_at(self, when: datetime) -> tuple[int, int]:
        """(publish_id, LanceDB table version) of the last publish finished at or before `when`."""
        rows = self.rows("SELECT publish_id, lance_version FROM publish_log WHERE status = 'published' "
                         "AND finished_at <= ? ORDER BY publish_id DESC LIMIT 1", [when])
        if not rows:
            raise LookupError(f"nothing was published at or before {when:%Y-%m-%d %H:%M:%S}")
        return rows[0]

    def as_of_versions(self) -> set[int]:
        """The LanceDB table versions as-of reads within the retention may open: those of the publishes finished
        since its start and of the last one before it (the state at its start)."""
        return {v for (v,) in self.rows(
            "SELECT lance_version FROM publish_log WHERE status = 'published' AND lance_version IS NOT NULL AND "
            "publish_id >= (SELECT coalesce(max(publish_id), 0) FROM publish_log WHERE status = 'published' AND "
            "finished_at < ?)", [utc_now() - as_of_retention()])}

    def publish_finished(self, publish_id: int) -> datetime:
        rows = self.rows("SELECT finished_at FROM publish_log WHERE publish_id = ? AND status = 'published'",
                         [publish_id])
        if not rows:
            raise LookupError(f"publish {publish_id} is not a finished publish")
        return rows[0][0]

    def history(self, doc_id: str) -> tuple[list[VersionEvent], list[UnitEvent]]:
        """A document's versions (with status and validity) and the unit versions that carried each."""
        versions = self.rows(f"SELECT version, status, valid_from, valid_to, publish_id, {self.source_path_sql}, acl "
                             "FROM documents WHERE doc_id = ? ORDER BY valid_from NULLS FIRST, version", [doc_id])
        units = self.rows(
            f"SELECT m.doc_version, {unit_key_sql('u')}, u.status, u.valid_from, u.valid_to, "
            "u.publish_id FROM unit_members m JOIN units u USING (unit_id, unit_version) WHERE m.doc_id = ? "
            "AND u.status IN ('current', 'retired') ORDER BY u.valid_from, 2", [doc_id])
        return [VersionEvent(*r) for r in versions], [UnitEvent(*r) for r in units]

    def current_sources(self) -> list[str]:
        """The sources the current documents were read from (resolved paths, as publish_documents lists them)."""
        return [s for (s,) in self.rows("SELECT DISTINCT source FROM documents WHERE status = 'current' ORDER BY 1")]

    def setting(self, key: str) -> str | None:
        """A workspace setting (such as the embedder its index was built with), or None if never set."""
        (exists,), = self.rows("SELECT count(*) FROM (SELECT table_name AS name FROM duckdb_tables() UNION ALL "
                               "SELECT view_name FROM duckdb_views()) WHERE name = 'workspace_settings'")
        if not exists:
            return None
        rows = self.rows("SELECT value FROM workspace_settings WHERE key = ?", [key])
        return rows[0][0] if rows else None

    def set_setting(self, key: str, value: str) -> None:
        self.con.execute(SETTINGS_SCHEMA)
        self.con.execute("INSERT OR REPLACE INTO workspace_settings VALUES (?, ?, ?)", [key, value, utc_now()])

    def store_id(self) -> str:
        """This catalog's identity, made once: an index carrying another identity was built for another catalog."""
        rows = self.rows("SELECT store_id FROM store_identity")
        if not rows:
            self.con.execute("INSERT INTO store_identity VALUES (?)", [uuid.uuid4().hex])
            rows = self.rows("SELECT store_id FROM store_identity")
        return rows[0][0]

    def index_row_truth(self) -> dict[tuple[str, str, int, int, int], tuple[tuple[str, ...], str, str]]:
        """(doc id, doc version, part, member start, member end) of each current unit's member → (document ACL,
        title, text): what every index row of that member must agree with."""
        rows = self.rows(
            "SELECT m.doc_id, m.doc_version, m.part, m.char_start, m.char_end, d.acl, d.title, d.text FROM units u "
            f"JOIN unit_members m USING (unit_id, unit_version) JOIN {self.with_texts} d ON d.doc_id = m.doc_id "
            "AND d.version = m.doc_version WHERE u.status = 'current'")
        return {(d, v, p, s, e): (tuple(acl), t, x) for d, v, p, s, e, acl, t, x in rows}
