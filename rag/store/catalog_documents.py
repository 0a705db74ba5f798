"""The catalog's document versions and the source files' records: their reads and writes (part of Catalog)."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from rag.sources.documents import Document
from rag.store.arrow_sql import registered
from rag.store.rows import AclEvent, CurrentText, CurrentVersion
from rag.store.schema import digest_sql, source_path_sql, split_source_paths
from rag.store.snapshot_files import published_columns, published_history
from rag.store.text_store import TextStore


class DocumentTables:
    """`documents`, `source_files` and `source_records`; mixed into Catalog, whose connection (`con`, `rows`,
    `bulk_insert`) and text store it uses."""

    texts: TextStore | None

    def current_fingerprint(self) -> tuple[int, int]:
        """(count, hash) of the current versions, texts and readers; a published snapshot's, never changing, once."""
        if not (self.read_only and "_fingerprint" in self.__dict__):  # ELITE asks on every question
            self._fingerprint = self.rows("SELECT count(*), coalesce(sum(hash(doc_id, version, content_hash, acl)), "
                                          "0) FROM documents WHERE status = 'current'")[0]
        return self._fingerprint

    def current_texts(self) -> list[CurrentText]:
        """Every current version's title and text, by doc id."""
        return [CurrentText(d, v, t, x, tuple(acl), h) for d, v, t, x, acl, h in self.rows(
            f"SELECT doc_id, version, title, text, acl, content_hash FROM {self.with_texts} "
            "WHERE status = 'current' ORDER BY doc_id")]

    def current_versions_of(self, doc_ids: list[str]) -> dict[str, str]:
        """doc_id → its current version, for those of `doc_ids` that have one."""
        return dict(self.rows("SELECT doc_id, version FROM documents WHERE status = 'current' "
                              "AND list_contains(?, doc_id)", [list(doc_ids)]))

    def current_counts(self) -> tuple[int, int]:
        """(current documents, current units)."""
        (documents,), = self.rows("SELECT count(*) FROM documents WHERE status = 'current'")
        (units,), = self.rows("SELECT count(*) FROM units WHERE status = 'current'")
        return documents, units

    def current_documents(self) -> list[Document]:
        """Every current document version, by doc id."""
        return [Document(doc_id=r[0], version=r[1], title=r[2], text=r[3], acl=tuple(r[4]), links=tuple(r[5]),
                         collection=r[6], source=r[7], source_path=r[8])
                for r in self.rows("SELECT doc_id, version, title, text, acl, links, collection, source, "
                                   f"source_path FROM {self.with_texts} WHERE status = 'current' ORDER BY doc_id")]

    def store_texts(self, docs: list[Document]) -> None:
        """Hold these documents' texts (by content hash) before rows naming them commit."""
        self.texts.add({d.content_hash: d.text for d in docs})

    @property
    def source_path_sql(self) -> str:
        """SQL of a `documents` row's whole source path: the writer holds it split (`schema.SOURCE_PATH`), a reader
        whole."""
        return "source_path" if self.texts is None else source_path_sql()

    def insert_documents(self, columns: dict[str, list]) -> None:
        """Insert document rows whose `text` column goes to the text store, under each row's content hash."""
        rows = dict(columns)
        self.texts.add(dict(zip(rows["content_hash"], rows.pop("text"))))
        self.bulk_insert("documents", split_source_paths(rows))

    def missing_texts(self, hashes: dict[tuple[str, str], str]) -> set[tuple[str, str]]:
        """Which of these versions (→ content hash) lost their text (dropped past the as-of retention)."""
        return self.texts.missing(hashes)

    def published_history_sql(self, columns: list[str], where: str = "true", keys_where: str = "true") -> str | None:
        """SQL for the document versions the writer dropped that the read state holds as history
        (rag.store.snapshot_files), if any. Rows of versions the writer holds are left out before the newest row per
        version is found, so that costs in proportion to the history dropped, not to the corpus."""
        dropped = ("NOT EXISTS (SELECT 1 FROM documents d WHERE d.doc_id = p.doc_id AND d.version = p.version) "
                   f"AND ({keys_where})")
        return published_history(Path(self.path).parent, "documents", columns, where, dropped)

    def published_versions(self, doc_ids: list[str] | None = None) -> dict[tuple[str, str], tuple]:
        """Versions of these ids (or all) that the writer dropped once published, as `existing_versions` gives them
        (meta hash and source unknown): a label and text the sources may bring back."""
        ids, params = ("doc_id IN (SELECT unnest(?::VARCHAR[]))", [doc_ids]) if doc_ids is not None else ("true", [])
        history = self.published_history_sql(["doc_id", "version", "content_hash", "status", "source_path"],
                                              keys_where=ids)
        if history is None:
            return {}
        return {(d, v): (h, None, s, None, path) for d, v, h, s, path in self.rows(history, params)}

    def restore_documents(self, keys: list[tuple[str, str]]) -> None:
        """Put these dropped versions' published rows back (a source holds them again); the caller then sets what the
        read state does not hold (meta hash, source)."""
        if not keys:
            return
        history = self.published_history_sql(list(published_columns(self.con, "documents")))
        if history is None:
            return
        with registered(self.con, "_restored", pa.table({"doc_id": [k[0] for k in keys],
                                                          "version": [k[1] for k in keys]})):
            self.con.execute(f"INSERT INTO documents BY NAME SELECT h.* FROM ({history}) h "
                             "SEMI JOIN _restored USING (doc_id, version)")

    def document_texts(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, str]]:
        """(doc_id, version) → (title, text) for the given versions, whatever their status."""
        if not keys:
            return {}
        return {(d, v): (t, x) for d, v, t, x in self.rows(
            f"SELECT d.doc_id, d.version, d.title, d.text FROM {self.with_texts} d "
            "JOIN (SELECT unnest(?) AS doc_id, unnest(?) AS version) k USING (doc_id, version)",
            [[k[0] for k in keys], [k[1] for k in keys]])}

    def raw_text_bytes(self) -> int:
        """UTF-8 bytes of the current documents' titles and texts: the denominator of the storage ratio."""
        (n,), = self.rows("SELECT coalesce(sum(strlen(coalesce(title, '')) + strlen(text)), 0) "
                          f"FROM {self.with_texts} WHERE status = 'current'")
        return n

    def current_versions(self) -> dict[str, CurrentVersion]:
        """doc_id → its current version, title, ACL and content hash."""
        acls: dict = {}  # one tuple per distinct ACL: documents share a few
        return {r[0]: CurrentVersion(r[0], r[1], r[2], acls.setdefault(acl := tuple(r[3]), acl), r[4])
                for r in self.rows(_CURRENT_VERSIONS)}

    def current_version_columns(self) -> pa.Table:
        """current_versions() as Arrow columns (doc_id, version, title, acl, content_hash and the row's digest
        `digest_lo`, `digest_hi`), one row per document."""
        return self.columns(_CURRENT_VERSION_COLUMNS)

    def versions_changed_from(self, last: pa.Table) -> tuple[pa.Table, pa.Table]:
        """Against a read state's current versions (`last`: their digests `digest_lo`, `digest_hi`): the digests no
        current version has now, and the current versions (current_version_columns' rows) whose digest it lacks."""
        found = self.columns_over(
            f"SELECT d.*, l.digest_lo AS last_lo, l.digest_hi AS last_hi FROM ({_CURRENT_VERSION_COLUMNS}) d FULL JOIN "
            "_last l USING (digest_lo, digest_hi) WHERE d.doc_id IS NULL OR l.digest_lo IS NULL", "_last", last)
        gone = pc.is_null(found.column("doc_id"))
        return (found.filter(gone).select(["last_lo", "last_hi"]).rename_columns(["digest_lo", "digest_hi"]),
                found.filter(pc.invert(gone)).drop_columns(["last_lo", "last_hi"]))

    def current_hashes(self) -> dict[str, list[tuple[str, str]]]:
        """Partition ("" in a whole workspace) → (doc_id, content hash) of its current documents, by doc id."""
        return {"": [tuple(r) for r in self.rows(
            "SELECT doc_id, content_hash FROM documents WHERE status = 'current' ORDER BY doc_id")]}

    def versions_changed_since(self, as_of: datetime) -> tuple[list[tuple[str, str]], list[tuple[str, str, tuple]]]:
        """(doc_id, content hash) of the current versions that were not current at `as_of`, and (doc_id, content hash,
        ACL) of the versions current then that are not now, each by doc id: what BM25 as of then changes."""
        then = "coalesce(valid_from <= ? AND (valid_to IS NULL OR valid_to > ?), false)"
        newer = self.rows(f"SELECT doc_id, content_hash FROM documents WHERE status = 'current' AND NOT {then} "
                          "ORDER BY doc_id", [as_of, as_of])
        older = self.rows(f"SELECT doc_id, content_hash, acl FROM documents WHERE status <> 'current' AND {then} "
                          "ORDER BY doc_id", [as_of, as_of])
        return [(d, h) for d, h in newer], [(d, h, tuple(acl)) for d, h, acl in older]

    def last_change_at(self, when: datetime) -> datetime | None:
        """The latest time at or before `when` that a document version's or unit version's validity began or ended, or
        a publish finished: every as-of read gives the same answer for both times (None: nothing changed by then)."""
        (found,), = self.rows(
            "SELECT greatest((SELECT max(valid_from) FROM documents WHERE valid_from <= $1), "
            "(SELECT max(valid_to) FROM documents WHERE valid_to <= $1), "
            "(SELECT max(valid_from) FROM units WHERE valid_from <= $1), "
            "(SELECT max(valid_to) FROM units WHERE valid_to <= $1), "
            "(SELECT max(finished_at) FROM publish_log WHERE status = 'published' AND finished_at <= $1))", [when])
        return found

    def texts_of(self, hashes: list[str]) -> dict[str, str]:
        """Content hash → text, read by hash from the text files (sorted by it, so a look-up reads the row groups
        that can hold it, not the documents table); {} where the catalog has no `texts` view."""
        if not hashes or not self.rows("SELECT 1 FROM duckdb_views() WHERE view_name = 'texts' LIMIT 1"):
            return {}
        return dict(self.rows("SELECT content_hash, any_value(text) FROM texts "
                              "WHERE content_hash IN (SELECT unnest(?)) GROUP BY content_hash", [hashes]))

    def texts_by_hash(self, hashes: list[str]) -> dict[str, str]:
        """Content hash → the title and text it is the hash of (what BM25 indexes)."""
        if not hashes:
            return {}
        return dict(self.rows(f"SELECT content_hash, any_value(title || '\n' || text) FROM {self.with_texts} "
                              "JOIN (SELECT unnest(?) AS content_hash) USING (content_hash) GROUP BY content_hash",
                              [hashes]))

    def update_documents(self, columns: dict[str, list]) -> None:
        """Set the other columns of the document versions named by `doc_id` and `version` in one joined statement
        (the table has no key index to look each one up)."""
        if len(columns["doc_id"]):
            columns = split_source_paths(columns)
            sets = ", ".join(f"{c} = u.{c}" for c in columns if c not in ("doc_id", "version"))
            with registered(self.con, "_updates", pa.table(columns)):
                self.con.execute(f"UPDATE documents SET {sets} FROM _updates u "
                                 "WHERE documents.doc_id = u.doc_id AND documents.version = u.version")

    def log_acl_changes(self, publish_id: int, docs: list[Document], at: datetime) -> None:
        """Record the ACL each in-place update replaces, where it differs (before the update is written)."""
        if docs:
            table = pa.table({"doc_id": [d.doc_id for d in docs], "version": [d.version for d in docs],
                              "acl": [list(d.acl) for d in docs]})
            with registered(self.con, "_acls", table):
                self.con.execute("INSERT INTO acl_changes SELECT d.doc_id, d.version, d.acl, u.acl, ?, ? FROM documents "
                                 "d JOIN _acls u ON d.doc_id = u.doc_id AND d.version = u.version WHERE "
                                 "list_sort(d.acl) IS DISTINCT FROM list_sort(u.acl)", [publish_id, at])

    def acl_history(self, doc_id: str) -> list[AclEvent]:
        """The ACL changes of a document's versions made in place, oldest first (none in a catalog from before)."""
        if not self.rows("SELECT 1 FROM (SELECT table_name AS name FROM duckdb_tables() UNION ALL SELECT view_name "
                         "FROM duckdb_views()) WHERE name = 'acl_changes'"):
            return []
        return [AclEvent(*r) for r in self.rows("SELECT version, acl_before, acl, publish_id, changed_at FROM "
                                                "acl_changes WHERE doc_id = ? ORDER BY publish_id, version", [doc_id])]

    def count_documents(self, publish_id: int, new: int, superseded: int, deleted: int) -> None:
        """Record in the publish log how many versions this publish added, superseded and deleted."""
        self.con.execute("UPDATE publish_log SET documents_new = ?, documents_superseded = ?, documents_deleted = ? "
                         "WHERE publish_id = ?", [new, superseded, deleted, publish_id])

    def replace_source_files(self, paths: list[str], states: dict[str, list], stale: list[str],
                             records: pa.Table) -> None:
        """Replace the stored states of these files (columns `states`) and the records of the `stale` ones.

        A record's content hash and source path are stored only where they differ from what `source_records()`
        gives without them: the hash of the version the catalog holds (a version's hash never changes), and
        `file:line` (or `file` for a whole file). Only the records that differ are deleted and inserted: one
        edited line of a 100K-line file rewrote all its records, 11 MB written (bench/storage.py --scale).
        """
        self.con.execute("DELETE FROM source_files WHERE path IN (SELECT unnest(?::VARCHAR[]))", [paths])
        self.bulk_insert("source_files", states)
        with registered(self.con, "_records", records):
            self.con.execute(
                "CREATE OR REPLACE TEMP TABLE _new_records AS SELECT r.* REPLACE ("
                "nullif(r.content_hash, d.content_hash) AS content_hash, "
                f"nullif(r.source_path, {_DEFAULT_PATH}) AS source_path) "
                "FROM _records r LEFT JOIN documents d USING (doc_id, version)")
        self.rewrite_changed("source_records", "_new_records", ("file", "position"), records.schema.names,
                             "t.file IN (SELECT unnest(?::VARCHAR[]))", [stale])
        self.con.execute("DROP TABLE _new_records")


_DEFAULT_PATH = "CASE WHEN r.position = 0 THEN r.file ELSE r.file || ':' || r.position END"

_CURRENT_VERSIONS = "SELECT doc_id, version, title, acl, content_hash FROM documents WHERE status = 'current'"
# Everything a read state holds of a current version: a version's ACL or title may change in place.
_VERSION_DIGEST = "{} AS digest_lo, {} AS digest_hi".format(
    *digest_sql(["doc_id", "version", "title", "content_hash", "array_to_string(acl, chr(30))"]))
_CURRENT_VERSION_COLUMNS = (f"SELECT doc_id, version, title, acl, content_hash, {_VERSION_DIGEST} FROM documents "
                            "WHERE status = 'current'")


def source_records(where: str = "true") -> str:
    """SQL for the stored source records that `where` (over the stored columns) keeps, with the content hash and
    source path each left out where it was the default put back. The filter goes inside: joined first, every record
    of the corpus would meet its document (0.6 s at 742K records for one id)."""
    return ("(SELECT r.* REPLACE (coalesce(r.content_hash, d.content_hash) AS content_hash, "
            f"coalesce(r.source_path, {_DEFAULT_PATH}) AS source_path) "
            f"FROM (SELECT * FROM source_records WHERE {where}) r LEFT JOIN documents d USING (doc_id, version))")
