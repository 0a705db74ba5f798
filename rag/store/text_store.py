"""Document texts, held once: Parquet files of (content hash, text) that the writer and every reader share.

A catalog `documents` row names its text by content hash; the texts lie in `snapshots/segments/NNNNNNNN-texts-*.parquet`,
listed by the catalog's `text_files` table and by every manifest, so readers read them where they lie and no
publish copies them. A file is written before the catalog transaction that lists it commits, so a committed row
never lacks its text; a file no commit listed is named after the next publish, which deletes it
(rag.store.snapshot_files). A text that only versions superseded or deleted longer ago than the as-of retention
carry is dropped: a file with `DROPPED_SHARE` of its rows dropped is rewritten without them, and the files after the
first are merged once there are more than `MAX_FILES`. A version made current again gets its text back from its source,
and so does a current version whose file was lost or damaged (it stays listed, out of the views, until then).
"""
from __future__ import annotations

import logging
import uuid
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa

from rag.store.arrow_sql import registered
from rag.store.schema import source_path_sql
from rag.store.snapshot_files import (
    SEGMENT_DIR,
    SNAPSHOT_DIR,
    NoSnapshot,
    read_pointer,
    sql_files,
    texts_query,
    write_parquet,
)
from rag.store.snapshot_repair import whole_parquet

MAX_FILES = 16
DROPPED_SHARE = 0.25  # texts compress to ~0.4x of the raw text: rewriting a file costs less than keeping its dead rows
_LOG = logging.getLogger("rag.store")
VIEW = "documents_with_text"  # the writer's documents joined to their texts (readers' `documents` view has them)


class TextStore:
    """The writer's side: adds texts, keeps the `texts` and `documents_with_text` views over the listed files."""

    def __init__(self, con: duckdb.DuckDBPyConnection, workspace: str | Path):
        self.con = con
        self.lost: list[str] = []
        self.workspace = Path(workspace)
        self.folder = self.workspace / SNAPSHOT_DIR / SEGMENT_DIR

    def opened(self) -> "TextStore":
        """Ready for the writer: an older catalog's texts moved out first (see `migrate`); listed files lost or
        damaged are `lost`, left out of its views until the next ingest reads their texts again (`forget_lost`)."""
        if self.con.execute("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'documents' "
                            "AND column_name = 'text'").fetchall()[0][0]:
            self.migrate()
        self.lost = [n for (n,) in self.con.execute("SELECT name FROM text_files ORDER BY name").fetchall()
                     if not whole_parquet(self.folder / n)]
        if self.lost:
            _LOG.warning("%s: text files lost or damaged, read again from the sources by the next ingest: %s",
                         self.workspace, ", ".join(self.lost))
        self.refresh()
        return self

    def names(self) -> list[str]:
        """The listed files, but the lost ones."""
        return [n for (n,) in self.con.execute("SELECT name FROM text_files ORDER BY name").fetchall()
                if n not in self.lost]

    def textless(self) -> set[tuple[str, str]]:
        """(doc_id, version) of the current versions whose text was in a lost file (none when no file was lost)."""
        if not self.lost:
            return set()
        return set(self.con.execute("SELECT doc_id, version FROM documents d WHERE status = 'current' AND NOT EXISTS "
                                    "(SELECT 1 FROM texts t WHERE t.content_hash = d.content_hash)").fetchall())

    def forget_lost(self) -> None:
        """Stop listing the lost files, once the sources gave back what they could of their texts."""
        if self.lost:
            self.con.execute("DELETE FROM text_files WHERE name IN (SELECT unnest(?::VARCHAR[]))", [self.lost])
            self.lost = []

    def refresh(self) -> None:
        """Point the `texts` view at the files the catalog lists now (inside the caller's transaction, if any)."""
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW texts AS {texts_query(self._paths(self.names()))}")
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {VIEW} AS SELECT d.* REPLACE ({source_path_sql('d')} AS "
                         "source_path), t.text FROM documents d LEFT JOIN texts t USING (content_hash)")

    def add(self, texts: dict[str, str]) -> int:
        """Store the texts (content hash → text) not held yet, in one new file; how many were new."""
        if not texts:
            return 0
        held = {h for (h,) in self.con.execute("SELECT content_hash FROM texts WHERE content_hash IN "
                                               "(SELECT unnest(?::VARCHAR[]))", [sorted(texts)]).fetchall()}
        todo = sorted(h for h in texts if h not in held)
        if not todo:
            return 0
        with registered(self.con, "_new_texts", pa.table({"content_hash": todo, "text": [texts[h] for h in todo]})):
            self._write("SELECT * FROM _new_texts", len(todo))
        return len(todo)

    def missing(self, hashes: dict[tuple[str, str], str]) -> set[tuple[str, str]]:
        """Which of these (doc_id, version) → content hash have no stored text (dropped past the retention)."""
        if not hashes:
            return set()
        held = {h for (h,) in self.con.execute("SELECT content_hash FROM texts WHERE content_hash IN "
                                               "(SELECT unnest(?::VARCHAR[]))", [sorted(set(hashes.values()))]).fetchall()}
        return {k for k, h in hashes.items() if h not in held}

    def expire(self, cutoff: datetime, also_kept: str | None = None) -> None:
        """Drop the texts no version current, never current, or left after `cutoff` carries (nor `also_kept`, SQL of
        content hashes: versions the writer dropped but the read state holds); merge small files."""
        names = self.names()
        if not names:
            return
        listed = sql_files(self._paths(names))
        also = f" UNION ALL SELECT content_hash FROM ({also_kept})" if also_kept else ""
        self.con.execute(
            "CREATE OR REPLACE TEMP TABLE _kept_hashes AS SELECT DISTINCT content_hash FROM (SELECT content_hash FROM "
            f"documents WHERE status = 'current' OR valid_to IS NULL OR valid_to >= ?{also})", [cutoff])
        counts = {Path(f).name: (n, dead) for f, n, dead in self.con.execute(
            f"SELECT filename, count(*), count(*) FILTER (k.content_hash IS NULL) FROM read_parquet([{listed}], "
            "filename = true) t LEFT JOIN _kept_hashes k USING (content_hash) GROUP BY filename").fetchall()}
        chosen = [n for n in names if counts.get(n, (0, 0))[1] >= DROPPED_SHARE * max(counts.get(n, (1, 0))[0], 1)]
        rest = [n for n in names if n not in chosen]
        if len(rest) >= MAX_FILES:  # the largest file stays unless the others outweigh it
            sizes = {n: (self.folder / n).stat().st_size for n in rest}
            base = max(rest, key=sizes.get)
            whole = sum(sizes.values()) - sizes[base] >= sizes[base]
            chosen += [n for n in rest if whole or n != base]
        if chosen:
            files = sql_files(self._paths(chosen))
            self.con.execute("BEGIN")
            try:
                self.con.execute("DELETE FROM text_files WHERE name IN (SELECT unnest(?::VARCHAR[]))", [chosen])
                (live,), = self.con.execute(f"SELECT count(*) FROM read_parquet([{files}]) SEMI JOIN _kept_hashes "
                                            "USING (content_hash)").fetchall()
                if live:
                    self._write(f"SELECT * FROM read_parquet([{files}]) SEMI JOIN _kept_hashes USING (content_hash)",
                                live)
                else:
                    self.refresh()
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")
        self.con.execute("DROP TABLE _kept_hashes")

    def migrate(self) -> None:
        """Move the texts of a catalog from before this store (a `documents.text` column) into it, atomically."""
        self.con.execute("BEGIN")
        try:
            (n,), = self.con.execute("SELECT count(DISTINCT content_hash) FROM documents").fetchall()
            if n:
                self._write("SELECT content_hash, any_value(text) AS text FROM documents "
                            "WHERE content_hash IS NOT NULL GROUP BY content_hash", n, refresh=False)
            self.con.execute("ALTER TABLE documents DROP COLUMN text")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")
        self.con.execute("CHECKPOINT")

    def _paths(self, names: list[str]) -> list[Path]:
        return [self.folder / n for n in names]

    def _write(self, query: str, rows: int, refresh: bool = True) -> None:
        """One new file of these rows, named after the next publish, listed in the catalog."""
        try:
            seq = read_pointer(self.workspace).seq + 1
        except NoSnapshot:
            seq = 1
        self.folder.mkdir(parents=True, exist_ok=True)
        name = f"{seq:08d}-texts-{uuid.uuid4().hex[:8]}.parquet"
        write_parquet(self.con, f"SELECT content_hash, text FROM ({query}) ORDER BY content_hash", self.folder / name)
        self.con.execute("INSERT INTO text_files VALUES (?, ?)", [name, rows])
        if refresh:
            self.refresh()
