"""Published read state: what readers open instead of the writer's catalog, written in proportion to the change.

DuckDB lets one process write a file or several read it, never both, so readers never touch `catalog.duckdb`.
At each publish point the writer appends one Parquet segment per read table holding only the rows that are
new or changed since the last publish (found by a hash of each row) and a tombstone per vanished key (none for
the history the writer drops once published, `HISTORY_HELD_HERE`); texts
are the writer's own text files keyed by content hash (rag.store.text_store), named as they are. A manifest (`snapshots/NNNNNNNN.json`)
lists each table's segments; the `snapshots/CURRENT` pointer names the manifest and the LanceDB table version
that goes with it, and is swapped with an atomic rename: a reader sees the old state or the new one, never half
of either. With $RAG_SNAPSHOT_URI the bucket holds the same files and its pointer is swapped first, with a
conditional write (rag.store.snapshot_objects); readers on other machines pull them (rag.store.snapshot_pull).
A reader builds each table as the newest row per key over its segments (`load_read_state`).

Segments are never rewritten, so a manifest is an immutable state. When a table has more than
`MAX_SEGMENTS` segments, the ones after its base are merged into one (or all of them, once they outweigh the
base): amortised, a publish writes in proportion to its change. Files no kept manifest names are deleted.
A file lost or damaged is published again by the writer when it next opens the catalog (rag.store.snapshot_repair).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from rag.store import snapshot_objects as objects
from rag.store.schema import source_path_sql
from rag.store.writer_held import check_held

SNAPSHOT_DIR = "snapshots"
SEGMENT_DIR = "segments"
POINTER = "CURRENT"
MAX_SEGMENTS = 16
# Table → key columns (empty: the whole row is its own key). `texts` lists the text files (rag.store.text_store).
READ_TABLES: dict[str, tuple[str, ...]] = {
    "documents": ("doc_id", "version"), "texts": ("content_hash",), "units": ("unit_id", "unit_version"),
    "unit_members": ("unit_id", "unit_version", "position"), "publish_log": ("publish_id",), "quarantine": (),
    "store_identity": (), "workspace_settings": ("key",), "acl_changes": ("doc_id", "version", "publish_id")}
# Table → SQL over a published row that is history: the writer drops such rows once published
# (Catalog._drop_published_history), so none is tombstoned and the read state is the one place as-of reads and
# history find them. A current document's row is not history: if it vanished, readers must stop seeing it.
HISTORY_HELD_HERE = {"units": "true", "unit_members": "true", "documents": "status <> 'current'"}
# Columns only the writer reads (reconciling sources, planning, re-staging units): not published, so a version's
# row in the read state is its identity, title, ACL, links (other partitions plan with them), collection, source
# path, text hash and validity.
WRITER_ONLY: dict[str, tuple[str, ...]] = {"documents": ("meta_hash", "source", "path_tail"),
                                           "units": ("content_hash",)}
# What a table is published from where the writer holds a column in another form: documents' source paths whole.
PUBLISHED_FROM = {"documents": f"(SELECT * REPLACE ({source_path_sql()} AS source_path) FROM documents)"}


def snapshots_kept() -> int:
    """Published snapshots kept for readers still on an older one: $RAG_SNAPSHOTS_KEPT or 4."""
    return int(os.environ.get("RAG_SNAPSHOTS_KEPT", "4"))


class NoSnapshot(LookupError):
    """Nothing has been published in this workspace yet."""


@dataclass(frozen=True)
class SnapshotInfo:
    """What the pointer says: which manifest, the LanceDB table version to read with it, when it was made."""

    seq: int
    file: str                 # the manifest's name inside snapshots/
    publish_id: int
    lance_version: int | None
    created_at: str
    epoch: int | None = None  # the writer lease's epoch it was made under (rag.store.writer_lease)

    def path(self, workspace: Path) -> Path:
        return Path(workspace) / SNAPSHOT_DIR / self.file


def read_pointer(workspace: str | Path) -> SnapshotInfo:
    """The publish the pointer names; NoSnapshot without one (no pointer, or one that names only a lease's epoch)."""
    path = Path(workspace) / SNAPSHOT_DIR / POINTER
    try:
        info = objects.published(path.read_bytes())
        if info is not None:
            return SnapshotInfo(**info)
        missing = "it names no publish yet"
    except FileNotFoundError:
        missing = f"no {SNAPSHOT_DIR}/{POINTER}"
    except (OSError, ValueError, TypeError, RecursionError) as err:
        raise NoSnapshot(f"{workspace}: unreadable snapshot pointer {SNAPSHOT_DIR}/{POINTER} "
                         f"({err.__class__.__name__}); nothing is served until the next publish") from None
    raise NoSnapshot(f"{workspace}: nothing published yet ({missing}); run `rag ingest --workspace {workspace}`, "
                     "which also rewrites a lost pointer")


def pointer_stamp(workspace: str | Path) -> tuple[int, int] | None:
    """A cheap identity of the pointer file (inode, mtime), to notice a publish without reading it."""
    try:
        st = (Path(workspace) / SNAPSHOT_DIR / POINTER).stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def read_manifest(path: Path) -> dict[str, list[str]]:
    """Table → its segment files (absolute paths), oldest first."""
    tables = json.loads(Path(path).read_text())["tables"]
    folder = Path(path).parent / SEGMENT_DIR
    return {t: [str(folder / f) for f in files] for t, files in tables.items()}


def manifest_tables(path: Path) -> dict[str, list[str]]:
    """A manifest's table → segment names; empty when it is lost or damaged (rag.store.snapshot_repair)."""
    try:
        return dict(json.loads(Path(path).read_text())["tables"])
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return {}


def publish_snapshot(con: duckdb.DuckDBPyConnection, catalog_path: str | Path, publish_id: int,
                     lance_version: int | None, keep: int | None = None,
                     base: tuple[int, dict[str, list[str]]] | None = None) -> SnapshotInfo:
    """Write the committed catalog's changes since the last publish (or since `base`, the seq and segments a repair
    rebuilt: rag.store.snapshot_repair) and make the result current."""
    folder = Path(catalog_path).parent / SNAPSHOT_DIR
    (folder / SEGMENT_DIR).mkdir(parents=True, exist_ok=True)
    try:
        previous = read_pointer(folder.parent)
    except NoSnapshot:
        previous = None
    seen = objects.remote_pointer(folder.parent)
    remote = objects.published(seen.body) if seen is not None else None   # None: the bucket holds no publish yet
    if remote is not None and (previous is None or remote["seq"] != previous.seq):
        if not objects.made_here(folder.parent, seen):
            raise objects.PointerMoved(f"{folder}: the bucket's pointer names a publish this catalog never made "
                                       f"(seq {remote['seq']}); another writer owns this store")
        write_atomic(folder / POINTER, seen.body)  # our last publish died between its swap and this write
        previous = read_pointer(folder.parent)
    # A pointer to a whole-catalog copy (the format before segments) starts the segments afresh.
    manifest = previous.path(folder.parent) if previous and previous.file.endswith(".json") else None
    tables = manifest_tables(manifest) if manifest else {}
    seq = (previous.seq if previous else 0) + 1
    if base is not None:
        seq, tables = base[0] + 1, dict(base[1])
    if lance_version is None and previous:
        lance_version = previous.lance_version
    present = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    for table, key in READ_TABLES.items():
        if table == "texts":
            tables[table] = [n for (n,) in con.execute("SELECT name FROM text_files ORDER BY name").fetchall()]
        elif table in present:
            tables[table] = _publish_table(con, folder / SEGMENT_DIR, table, key, tables.get(table, []), seq)
    name = f"{seq:08d}.json"
    write_atomic(folder / name, json.dumps({"seq": seq, "publish_id": publish_id, "tables": tables}))
    info = SnapshotInfo(seq, name, publish_id, lance_version,
                        datetime.now(timezone.utc).isoformat(timespec="milliseconds"))
    info = replace(info, epoch=check_held(folder.parent))
    pointer = json.dumps(asdict(info))
    objects.push(folder.parent, seq, name, pointer, seen)
    write_atomic(folder / POINTER, pointer)
    prune(folder, seq, snapshots_kept() if keep is None else keep)
    objects.prune_remote(folder.parent)
    return info


def _publish_table(con, folder: Path, table: str, key: tuple[str, ...], segments: list[str], seq: int) -> list[str]:
    """Append a segment of this table's changes (none if nothing changed); merge segments when there are many.

    Only keys and row hashes are compared (a hash aggregate, no sort); whole rows are read for the changes only.
    A keyed table's segments hold no row hash: it is computed from the published rows, as from the catalog's.
    """
    key_cols = ", ".join(key) if key else "_h"
    files = [str(folder / f) for f in segments]
    columns = published_columns(con, table)
    current = f"SELECT {', '.join(columns)}, {row_hash(columns)} AS _h FROM {PUBLISHED_FROM.get(table, table)}"
    if files:
        history = HISTORY_HELD_HERE.get(table, "false")
        con.execute(f"CREATE OR REPLACE TEMP TABLE _published AS "
                    f"{published_keys(con, files, key, columns, history)}")
        gone = "" if history == "true" else (
            f" UNION ALL BY NAME SELECT {', '.join('p.' + c for c in dict.fromkeys([*key, '_h']))}, true AS _gone "
            f"FROM _published p ANTI JOIN ({current}) c USING ({key_cols}) WHERE NOT p._history")
        con.execute(f"CREATE OR REPLACE TEMP TABLE _delta AS SELECT c.*, false AS _gone FROM ({current}) c "
                    f"ANTI JOIN _published p USING ({', '.join([*key, '_h'])}){gone}")
    else:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _delta AS SELECT *, false AS _gone FROM ({current})")
    (changed,), = con.execute("SELECT count(*) FROM _delta").fetchall()
    if changed or not files:  # a table's first segment is written even when empty: it carries the schema
        name = f"{seq:08d}-{table}.parquet"
        write_parquet(con, f"SELECT {_stored(key)}, {seq}::BIGINT AS _seq FROM _delta ORDER BY {key_cols}",
                      folder / name)
        segments = [*segments, name]
    con.execute("DROP TABLE IF EXISTS _published; DROP TABLE IF EXISTS _delta")
    return _merge(con, folder, table, key, segments, seq) if len(segments) > MAX_SEGMENTS else segments


def published_columns(con, table: str) -> dict[str, str]:
    """Column → type of the table as readers get it: without its `WRITER_ONLY` columns (a segment from before
    holds them too: read by name, they are ignored)."""
    return dict(con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' AND "
        "NOT list_contains(?, column_name) ORDER BY column_index", [table, list(WRITER_ONLY.get(table, ()))]).fetchall())


def row_hash(columns: dict[str, str], present: set[str] | None = None) -> str:
    """SQL for a row's hash over these columns (a column not `present` in the rows read counts as NULL)."""
    return "hash(struct_pack(" + ", ".join(
        f'"{c}" := {c if present is None or c in present else "NULL"}::{t}' for c, t in columns.items()) + "))"


def _stored(key: tuple[str, ...]) -> str:
    """What a segment holds of a `_delta` row: all of it, without the row hash unless the hash is the key."""
    return "*" if not key else "* EXCLUDE (_h)"


def published_keys(con, files: list[str], key: tuple[str, ...], columns: dict[str, str], history: str = "false"
                   ) -> str:
    """SQL for the key, row hash and `_history` (SQL `history` over the row) of every live row over these segments:
    the newest per key, not a tombstone."""
    listed = sql_files(files)
    if not key:
        return (f"SELECT _h, {history} AS _history FROM read_parquet([{listed}]) GROUP BY _h "
                "HAVING NOT arg_max(_gone, _seq)")
    cols = ", ".join(key)
    rows = f"read_parquet([{listed}], union_by_name = true)"
    present = {c for (c, *_) in con.execute(f"DESCRIBE SELECT * FROM {rows}").fetchall()}
    if len(files) == 1:  # a single segment (a table's first, or merged) holds one row per key
        return f"SELECT {cols}, {row_hash(columns, present)} AS _h, {history} AS _history FROM {rows} WHERE NOT _gone"
    return (f"SELECT {cols}, arg_max({row_hash(columns, present)}, _seq) AS _h, arg_max({history}, _seq) AS _history "
            f"FROM {rows} GROUP BY {cols} HAVING NOT arg_max(_gone, _seq)")


def published_history(workspace: str | Path, table: str, columns: list[str], where: str = "true",
                      keys_where: str = "true") -> str | None:
    """SQL for the published history rows of `table` (`HISTORY_HELD_HERE`) that match `where`, newest per key, among
    the keys `keys_where` (over key columns of rows aliased `p` only: applied before the newest row is found) picks;
    None before the first publish in segments."""
    try:
        info = read_pointer(workspace)
    except NoSnapshot:
        return None
    files = read_manifest(info.path(Path(workspace))).get(table) if info.file.endswith(".json") else None
    if not files:
        return None
    newest = newest_rows(files, ", ".join(READ_TABLES[table]), where=keys_where)
    return f"SELECT {', '.join(columns)} FROM ({newest}) WHERE NOT _gone AND {HISTORY_HELD_HERE[table]} AND ({where})"


def _merge(con, folder: Path, table: str, key: tuple[str, ...], segments: list[str], seq: int) -> list[str]:
    """The segments after the base as one (tombstones kept), or all of them as one once they outweigh the base."""
    key_cols = ", ".join(key) if key else "_h"
    sizes = [(folder / s).stat().st_size for s in segments]
    whole = sum(sizes[1:]) >= sizes[0]
    chosen = segments if whole else segments[1:]
    rows = newest_rows([str(folder / s) for s in chosen], key_cols)
    name = f"{seq:08d}-{table}-merged.parquet"
    kept = "*" if not key else "COLUMNS(lambda c: c != '_h')"  # a row hash of a segment from before
    write_parquet(con, f"SELECT {kept} FROM ({rows}) {'WHERE NOT _gone' if whole else ''} ORDER BY {key_cols}",
                  folder / name)
    return [name] if whole else [segments[0], name]


def newest_rows(files: list[str], key_cols: str, columns=None, where: str = "true") -> str:
    """SQL for the newest row of each key over these segments (of the given columns, or all), among the rows (aliased
    `p`) that `where` keeps: a filter on key columns only, applied before the newest row is found."""
    listed = sql_files(files)
    return (f"SELECT {', '.join(columns) if columns else '*'} FROM read_parquet([{listed}], union_by_name = true) p "
            f"WHERE {where} QUALIFY row_number() OVER (PARTITION BY {key_cols} ORDER BY _seq DESC) = 1")


def load_read_state(con: duckdb.DuckDBPyConnection, manifest: Path, schema: str = "main") -> None:
    """Build the published catalog's tables in `schema` of an in-memory connection, as a reader sees them.

    Every table but the texts is materialised (the newest row per key); `texts` stays in its Parquet
    segments and `documents` joins it, so a reader holds no text it does not read.
    """
    for table, files in read_manifest(manifest).items():
        if table == "texts":
            con.execute(f"CREATE VIEW {schema}.texts AS {texts_query(files)}")
            continue
        con.execute(f"CREATE TABLE {schema}.{held_name(table)} AS {live_rows(table, files)}")
    con.execute(f"CREATE VIEW {schema}.documents AS {documents_view(schema)}")


MARKERS = ("_h", "_gone", "_seq")  # a segment's row hash, tombstone flag and order: never shown to a reader


def held_name(table: str) -> str:
    """Documents are held as `doc_rows`; the `documents` view joins them to their texts."""
    return "doc_rows" if table == "documents" else table


def live_rows(table: str, files: list[str]) -> str:
    """SQL for a read table as a reader sees it: the newest live row per key, without the segment markers."""
    key = ", ".join(READ_TABLES[table]) or "_h"
    return f"SELECT COLUMNS(lambda c: c NOT IN {MARKERS}) FROM ({newest_over_base(files, key)}) WHERE NOT _gone"


def documents_view(schema: str | None = None) -> str:
    """SQL of the `documents` view: the held rows with their texts (`schema`'s, else whichever the name finds)."""
    at = f"{schema}." if schema else ""
    return f"SELECT d.*, t.text FROM {at}doc_rows d LEFT JOIN {at}texts t ON t.content_hash = d.content_hash"


def newest_over_base(files: list[str], key_cols: str) -> str:
    """The newest row per key: the base segment's rows no later segment touches, and the newest of the later
    ones (small), so the base is filtered by a hash join instead of being sorted."""
    base = f"SELECT * FROM read_parquet(['{quote(files[0])}'])"
    if len(files) == 1:
        return base
    later = sql_files(files[1:])
    return (f"{base} ANTI JOIN (SELECT DISTINCT {key_cols} FROM read_parquet([{later}], union_by_name = true)) "
            f"USING ({key_cols}) UNION ALL BY NAME {newest_rows(files[1:], key_cols)}")


def write_parquet(con, query: str, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.tmp")
    # zstd level 19, not DuckDB's default 3: the texts and segments are written once and kept. Against level 9, 2Wiki's
    # read state is 11% smaller, for ~0.35 CPU ms a text and ~0.04 a document row written (bench/storage.py)
    con.execute(f"COPY ({query}) TO '{quote(str(tmp))}' (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 19, "
                "ROW_GROUP_SIZE 8192)")
    fsync(tmp)
    os.replace(tmp, dest)


def write_atomic(path: Path, text: str | bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(text.encode() if isinstance(text, str) else text)
    fsync(tmp)
    os.replace(tmp, path)


def prune(folder: Path, seq: int, keep: int) -> None:
    """Delete manifests older than the newest `keep` and every segment none of the kept ones names."""
    kept: set[str] = set()
    for path in folder.glob("*.json"):
        if path.stem.isdigit() and int(path.stem) <= seq - max(keep, 1):
            path.unlink(missing_ok=True)
        elif path.stem.isdigit():
            kept.update(f for files in manifest_tables(path).values() for f in files)
    for path in (folder / SEGMENT_DIR).glob("*.parquet"):
        if path.name not in kept and int(path.name[:8]) <= seq:
            path.unlink(missing_ok=True)
    for path in folder.glob("*.duckdb"):  # whole-catalog copies of the format before segments
        path.unlink(missing_ok=True)


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def quote(value: str) -> str:
    return value.replace("'", "''")


def sql_files(paths) -> str:
    """Paths as the items of a quoted SQL list, for read_parquet([...])."""
    return ", ".join("'" + quote(str(p)) + "'" for p in paths)


def texts_query(paths: list) -> str:
    """SQL for (content_hash, text) over these text files: the writer's and every reader's `texts` view."""
    if not paths:
        return "SELECT NULL::VARCHAR AS content_hash, NULL::VARCHAR AS text WHERE false"
    return f"SELECT content_hash, text FROM read_parquet([{sql_files(paths)}])"
