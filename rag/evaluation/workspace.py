"""A benchmark folder ingested through the publishing steps the ingest assets run, with its preparation costs."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rag import consistency
from rag.catalog import Catalog
from rag.index import SubchunkIndex
from rag.publish import IngestSettings, publish_documents, publish_index, publish_units
from rag.summary import bytes_on_disk
from rag.tokens import TokenCounter
from rag.workspace import Workspace

BENCH_ACL = "bench"  # the one default ACL every benchmark document gets


@dataclass
class Prepared:
    """An ingested workspace, open for queries, with what it took to build and store it."""

    benchmark: str
    workspace: Path
    lance_uri: str
    reader: Workspace             # the read side: published snapshots, as every query reads them
    ingest_seconds: float         # this run's ingest (near zero when the workspace was already up to date)
    index_build_seconds: float    # the publishes that embedded sub-chunks, from the catalog's publish log
    catalog_open_seconds: float   # all ELITE needs before its first query (its sentence store is built lazily)
    documents: int
    units: int
    subchunks: int
    raw_text_bytes: int
    catalog_bytes: int
    index_bytes: int
    checks: dict[str, bool]

    def storage_bytes(self, method: str) -> int:
        """ELITE reads the catalog only; LongRAG and the short-chunk baseline also need the LanceDB index."""
        return self.catalog_bytes + (0 if method == "elite" else self.index_bytes)

    def close(self) -> None:
        self.reader.close()


def benchmark_settings(folder: Path) -> IngestSettings:
    """The benchmark format: docs.jsonl as the only source, links derived from titles, one default ACL."""
    return IngestSettings(sources=[str(Path(folder) / "docs.jsonl")], default_acl=(BENCH_ACL,), derive_links=True)


def prepare_workspace(folder: Path, workspace: Path, embedder, counter: TokenCounter,
                      lance_uri: str | None = None) -> Prepared:
    """Bring the workspace up to date with the folder's docs.jsonl (incremental), check it, open it for queries.

    A workspace built with another embedder than `embedder` is re-embedded (never mixed).
    """
    folder, workspace = Path(folder), Path(workspace)
    for name in ("docs.jsonl", "questions.jsonl"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder}: no {name} (expected the benchmark format)")
    uri = lance_uri or str(workspace / "lancedb")
    settings = benchmark_settings(folder)
    start = time.perf_counter()
    catalog = Catalog(workspace / "catalog.duckdb", entry="rag eval")
    try:
        publish_documents(catalog, settings)
        publish_units(catalog, counter, settings)
        report = publish_index(catalog, SubchunkIndex(uri), embedder.encode, counter, settings, embedder.name)
        checks = _checks(catalog, SubchunkIndex(uri))
        (units,), = catalog.rows("SELECT count(*) FROM units WHERE status = 'current'")
        (documents,), = catalog.rows("SELECT count(*) FROM documents WHERE status = 'current'")
        build_seconds, raw = index_build_seconds(catalog), catalog.raw_text_bytes()
    finally:
        catalog.close()
    ingest = time.perf_counter() - start
    start = time.perf_counter()
    reader = Workspace(workspace, lance_uri=uri, embedder=embedder, counter=counter)
    opened = time.perf_counter() - start
    return Prepared(folder.name, workspace, uri, reader, ingest, build_seconds, opened, documents, units,
                    report.subchunks, raw, bytes_on_disk(str(workspace / "catalog.duckdb")), bytes_on_disk(uri),
                    checks)


def index_build_seconds(catalog: Catalog) -> float:
    """Wall time of the publishes that embedded anything: what building the queried index cost."""
    (seconds,), = catalog.rows(
        "SELECT coalesce(sum(epoch(finished_at) - epoch(started_at)), 0) FROM publish_log "
        "WHERE status = 'published' AND subchunks_embedded > 0")
    return float(seconds)


def _checks(catalog: Catalog, index: SubchunkIndex) -> dict[str, bool]:
    """The ingest asset checks, so a report is never computed from an inconsistent workspace unnoticed."""
    return {"every_document_in_one_unit": consistency.documents_in_exactly_one_unit(catalog).passed,
            "index_matches_current_units": consistency.index_matches_current_units(catalog, index).passed,
            "no_stale_versions_in_index": consistency.no_stale_rows(catalog, index).passed}
