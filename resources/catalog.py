from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from rag.sources.partitions import check_layout, claim_store, store
from rag.store.catalog import Catalog
from rag.store.writer_lock import WriterLock
from resources.failures import one_line_failure


class CatalogResource(ConfigurableResource):
    """The DuckDB catalog file: documents, units, publish log, quarantine. Its run holds the writer lock.

    The lock is taken when the run's resources are set up and released at teardown, so with the in-process
    executor one run holds the workspace (or, in a partitioned run, its partition) from its first step to its
    last and no other writer interleaves. Each partition has a catalog, lock and snapshots of its own. The run
    opens its catalog once, at its first step, and closes it at teardown: one DuckDB open was a third of a small
    rerun's CPU, and every step and check opened its own.
    """

    path: str
    wait_s: Optional[float] = None   # how long a second writer waits; default $RAG_WRITER_WAIT_S or 60 s
    lance_uri: Optional[str] = None  # the workspace's LanceDB URI, recorded in each partition's store
    _lock: Optional[WriterLock] = PrivateAttr(default=None)
    _catalogs: dict = PrivateAttr(default_factory=dict)   # partition (None: the workspace) -> the run's open catalog

    def setup_for_execution(self, context: InitResourceContext) -> None:
        run = context.run.run_id[:8] if context.run else "no run"
        partition = context.run.tags.get("dagster/partition") if context.run else None
        self._lock = WriterLock(self.catalog_path(partition).parent, f"dagster run {run}", self.wait_s)
        self._lock.acquire()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        try:
            while self._catalogs:
                self._catalogs.popitem()[1].close()
        finally:
            if self._lock:
                self._lock.release()
                self._lock = None   # outside a run, `open` closes what it opens again

    def catalog_path(self, partition: str | None = None) -> Path:
        if not partition:
            return Path(self.path)
        return store(Path(self.path).parent, partition, self.lance_uri).catalog_path

    @contextmanager
    def open(self, partition: str | None = None) -> Iterator[Catalog]:
        """The catalog, kept open for the run's later steps and checks; outside a run, closed after use. A step that
        fails closes it as it is (no compaction), and the next step opens it again."""
        with one_line_failure():
            check_layout(Path(self.path).parent, bool(partition))
        if partition:
            claim_store(store(Path(self.path).parent, partition, self.lance_uri))
        catalog = self._catalogs.pop(partition, None) or Catalog(self.catalog_path(partition), entry="dagster",
                                                                  wait_s=self.wait_s)
        try:
            yield catalog
        except BaseException:
            catalog.close()
            raise
        if self._lock:
            self._catalogs[partition] = catalog
        else:
            catalog.close()
