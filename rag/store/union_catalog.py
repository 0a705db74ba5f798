"""The read side of a partitioned workspace: every partition's published snapshot as one read-only catalog.

Each partition's published state is loaded into a schema of its own and every catalog table becomes a view over
the union, so each reader query runs unchanged. Document ids are meant to be unique across partitions; an id
current in two partitions is hidden from every view (fail closed), because joining members to documents by id
could otherwise pair one partition's member with the other partition's ACL.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from rag.store.catalog import Catalog, CatalogError
from rag.store.snapshot_files import load_read_state, quote

_TABLES = ("documents", "units", "unit_members", "publish_log", "quarantine", "store_identity", "workspace_settings",
           "acl_changes", "texts")
_PER_PARTITION = {"publish_log", "quarantine", "acl_changes"}   # their ids restart in every partition: keep which one said it


@dataclass(frozen=True)
class PartitionTotals:
    """What one partition's published snapshot holds."""

    partition: str
    current: int
    superseded: int
    deleted: int
    units: int
    last_published: datetime | None


class UnionCatalog(Catalog):
    """Read-only union of partition snapshots; `parts` maps each partition key to its snapshot file."""

    def __init__(self, path: str | Path, parts: dict[str, Path]):
        self.path, self.file, self.read_only = str(path), str(path), True
        self._lock, self._writer = threading.Lock(), None
        self.parts = dict(sorted(parts.items()))
        self.con = duckdb.connect()
        try:
            self._aliases = self._attach()
            self._shared_ids(self._aliases)
            self._views(self._aliases)
        except (duckdb.Error, OSError, ValueError, KeyError) as err:
            self.con.close()
            raise CatalogError(f"{path}: cannot open a partition snapshot ({str(err).splitlines()[0]})") from None

    def _attach(self) -> dict[str, str]:
        aliases = {}
        for i, (key, file) in enumerate(self.parts.items()):
            if str(file).endswith(".duckdb"):  # a whole-catalog copy, the format before segments
                self.con.execute(f"ATTACH '{quote(str(file))}' AS p{i} (READ_ONLY)")
            else:
                self.con.execute(f"CREATE SCHEMA p{i}")
                load_read_state(self.con, Path(file), f"p{i}")
            aliases[key] = f"p{i}"
        return aliases

    def _shared_ids(self, aliases: dict[str, str]) -> None:
        union = " UNION ALL ".join(f"SELECT DISTINCT doc_id, '{a}' AS p FROM {a}.documents WHERE status = 'current'"
                                   for a in aliases.values()) or "SELECT NULL::VARCHAR AS doc_id, NULL AS p LIMIT 0"
        self.con.execute(f"CREATE TEMP TABLE shared_ids AS SELECT doc_id FROM ({union}) GROUP BY doc_id "
                         "HAVING count(*) > 1")

    def _views(self, aliases: dict[str, str]) -> None:
        present = {(d, t) for d, t in self.con.execute(
            "SELECT database_name, table_name FROM duckdb_tables() UNION ALL "  # an attached copy's tables
            "SELECT schema_name, table_name FROM duckdb_tables() UNION ALL "    # a loaded manifest's
            "SELECT schema_name, view_name FROM duckdb_views()").fetchall()}
        for table in _TABLES:
            selects = []
            for key, a in aliases.items():
                if (a, table) not in present:
                    continue
                extra = f", '{quote(key)}' AS partition" if table in _PER_PARTITION else ""
                hide = " WHERE doc_id NOT IN (SELECT doc_id FROM shared_ids)" if table in (
                    "documents", "unit_members") else ""
                selects.append(f"SELECT *{extra} FROM {a}.{table}{hide}")
            if selects:
                self.con.execute(f"CREATE TEMP VIEW {table} AS " + " UNION ALL BY NAME ".join(selects))

    def current_hashes(self) -> dict[str, list[tuple[str, str]]]:
        return {key: [tuple(r) for r in self.rows(
            f"SELECT doc_id, content_hash FROM {alias}.documents WHERE status = 'current' "
            "AND doc_id NOT IN (SELECT doc_id FROM shared_ids) ORDER BY doc_id")] for key, alias in self._aliases.items()}

    def reopen(self) -> None:
        """Its tables are built in this process's memory from the partitions' files: reopening would rebuild them."""

    def hidden_ids(self) -> list[str]:
        """Document ids current in more than one partition, hidden from readers until one partition drops them."""
        return [r[0] for r in self.rows("SELECT doc_id FROM shared_ids ORDER BY 1")]

    def shared_places(self, doc_id: str | None = None) -> dict[str, list[tuple[str, str, str]]]:
        """Each hidden id (or just `doc_id`) → (partition, version, source path) of every partition publishing it."""
        union = " UNION ALL ".join(
            f"SELECT doc_id, '{quote(key)}' AS partition, version, source_path FROM {a}.documents "
            "WHERE status = 'current' AND doc_id IN (SELECT doc_id FROM shared_ids)" for key, a in self._aliases.items())
        if not union:
            return {}
        places: dict[str, list[tuple[str, str, str]]] = {}
        for d, partition, version, path in self.rows(f"SELECT * FROM ({union}) WHERE ? IS NULL OR doc_id = ? "
                                                     "ORDER BY 1, 2", [doc_id, doc_id]):
            places.setdefault(d, []).append((partition, version, path))
        return places

    def current_links(self) -> dict[str, list[tuple[str, str, list[str]]]]:
        """partition → (doc id, title, explicit links) of each current document it publishes."""
        return {key: [tuple(r) for r in self.rows(f"SELECT doc_id, title, links FROM {a}.documents "
                                                  "WHERE status = 'current' ORDER BY doc_id")]
                for key, a in self._aliases.items()}

    def partition_totals(self) -> list[PartitionTotals]:
        """Documents by status, current units and the last publish of every partition, in key order."""
        totals = []
        for key, a in self._aliases.items():
            (current, superseded, deleted), = self.rows(
                f"SELECT count(*) FILTER (status = 'current'), count(*) FILTER (status = 'superseded'), "
                f"count(*) FILTER (status = 'deleted') FROM {a}.documents")
            (units,), = self.rows(f"SELECT count(*) FROM {a}.units WHERE status = 'current'")
            (last,), = self.rows(f"SELECT max(finished_at) FROM {a}.publish_log WHERE status = 'published'")
            totals.append(PartitionTotals(key, current, superseded, deleted, units, last))
        return totals

    def versions_at(self, when: datetime | None) -> dict[str, int | None]:
        """partition → the index version of its last publish at or before `when` (None: its newest)."""
        rows = self.rows("SELECT partition, arg_max(lance_version, publish_id) FROM publish_log "
                         "WHERE status = 'published' AND (? IS NULL OR finished_at <= ?) GROUP BY partition",
                         [when, when])
        if when is not None and not rows:
            raise LookupError(f"nothing was published at or before {when:%Y-%m-%d %H:%M:%S}")
        return dict(rows)

    def publish_at(self, when: datetime) -> tuple[int, int]:
        raise LookupError("a partitioned workspace has one publish log per partition; use versions_at")

    def publish_finished(self, publish_id: int) -> datetime:
        raise LookupError("publish numbers are per partition in a partitioned workspace; give --as-of a timestamp")


def shared_ids_markdown(shared: dict[str, list[tuple[str, str, str]]]) -> str:
    """The error rows for asset metadata: one per hidden id, naming every partition and file that publishes it."""
    rows = ["| severity | doc_id | published by | reason |", "|---|---|---|---|"]
    rows += [f"| error | {d} | " + "; ".join(f"{p} ({path})" for p, _, path in places)
             + " | one id in several partitions: hidden from readers until all but one drop it |"
             for d, places in sorted(shared.items())]
    return "\n".join(rows)
