"""A benchmark folder ingested through the publishing steps the ingest assets run, with its preparation costs."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rag.models.tokens import TokenCounter
from rag.query.methods import METHODS
from rag.query.workspace import Workspace
from rag.store import consistency
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings
from rag.store.storage import Storage, measure

BENCH_ACL = "bench"  # the one default ACL every benchmark document gets


@dataclass
class Prepared:
    """A published workspace, open for queries, with what it takes to build and store it."""

    benchmark: str
    workspace: Path
    lance_uri: str
    reader: Workspace             # the read side: published snapshots, as every query reads them
    ingest_seconds: float         # this run's ingest (0 when evaluating a workspace another run keeps up to date)
    index_build_seconds: float    # one clean build of the queried index: its sub-chunks × the measured embed rate
    catalog_open_seconds: float   # opening the published snapshot, which every method needs
    documents: int
    units: int
    subchunks: int
    storage: Storage
    checks: dict[str, bool]

    @property
    def raw_text_bytes(self) -> int:
        return self.storage.raw_text_bytes

    def storage_bytes(self, method: str) -> int:
        """ELITE reads the catalog only; the index-based methods also need the LanceDB index."""
        return self.storage.total(METHODS[method].uses_index)

    def storage_ratio(self, method: str) -> float:
        return self.storage.ratio(METHODS[method].uses_index)

    def close(self) -> None:
        self.reader.close()


def benchmark_settings(folder: Path) -> IngestSettings:
    """The benchmark format: docs.jsonl as the only source, links derived from titles, one default ACL."""
    return IngestSettings(sources=[str(Path(folder) / "docs.jsonl")], default_acl=(BENCH_ACL,), derive_links=True)


def prepare_workspace(folder: Path, workspace: Path, embedder, counter: TokenCounter,
                      lance_uri: str | None = None) -> Prepared:
    """Bring the workspace up to date with the folder's docs.jsonl (incremental), then open it for queries.

    A workspace built with another embedder than `embedder` is re-embedded (never mixed).
    """
    start = time.perf_counter()
    ingest_benchmark(folder, workspace, embedder, counter, lance_uri)
    return open_prepared(Path(folder).name, workspace, embedder, counter, lance_uri,
                         ingest_seconds=time.perf_counter() - start)


def ingest_benchmark(folder: Path, workspace: Path, embedder, counter: TokenCounter, lance_uri: str | None = None):
    """The one writer: publish the folder's docs.jsonl into the workspace; returns the index step's report."""
    folder, workspace = Path(folder), Path(workspace)
    for name in ("docs.jsonl", "questions.jsonl"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder}: no {name} (expected the benchmark format)")
    settings = benchmark_settings(folder)
    catalog = Catalog(workspace / "catalog.duckdb", entry="rag eval")
    try:
        _refuse_other_sources(catalog, Path(settings.sources[0]).resolve(), workspace)
        publish_documents(catalog, settings)
        publish_units(catalog, counter, settings)
        return publish_index(catalog, SubchunkIndex(lance_uri or str(workspace / "lancedb")), embedder.encode,
                             counter, settings, embedder.name)
    finally:
        catalog.close()


def _refuse_other_sources(catalog: Catalog, docs: Path, workspace: Path) -> None:
    """A benchmark workspace holds one folder's documents: a publish reads only its own sources, so documents from
    another folder (the bundled slice, then the full benchmark) would stay and join the corpus the questions search."""
    others = [s for s in catalog.current_sources() if s != str(docs)]
    if others:
        raise ValueError(f"{workspace}: holds the documents of {others[0]}, not of {docs}; remove it or choose "
                         "another workspace")


def open_prepared(name: str, workspace: Path, embedder, counter: TokenCounter, lance_uri: str | None = None,
                  ingest_seconds: float = 0.0) -> Prepared:
    """The published workspace as the evaluation reads it: never the writer's catalog file, never its lock."""
    workspace = Path(workspace)
    uri = lance_uri or str(workspace / "lancedb")
    start = time.perf_counter()
    reader = Workspace(workspace, lance_uri=uri, embedder=embedder, counter=counter)
    opened = time.perf_counter() - start
    snap = reader.snapshot()
    catalog = snap.catalog
    checks = _checks(catalog, snap.index)
    documents, units = catalog.current_counts()
    subchunks = snap.index.count()
    return Prepared(name, workspace, uri, reader, ingest_seconds, index_build_seconds(catalog, subchunks), opened,
                    documents, units, subchunks, measure(workspace / "catalog.duckdb", uri, catalog.raw_text_bytes()),
                    checks)


def index_build_seconds(catalog: Catalog, subchunks: int) -> float:
    """What one clean build of an index of `subchunks` rows costs, at the rate the publish log measured.

    Summing the log instead would charge every earlier re-embed to the index (a workspace re-versioned every
    night would look dearer each night); one clean build is what every method is charged.
    """
    seconds, embedded = catalog.embedding_time()
    return float(seconds) * subchunks / embedded if embedded else 0.0


def _checks(catalog: Catalog, index: SubchunkIndex) -> dict[str, bool]:
    """The ingest asset checks, so a report is never computed from an inconsistent workspace unnoticed."""
    return {"every_document_in_one_unit": consistency.documents_in_exactly_one_unit(catalog).passed,
            "index_matches_current_units": consistency.index_matches_current_units(catalog, index).passed,
            "no_stale_versions_in_index": consistency.no_stale_rows(catalog, index).passed}
