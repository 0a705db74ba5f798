from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from rag.catalog import Catalog
from rag.writer import WriterLock


class CatalogResource(ConfigurableResource):
    """The DuckDB catalog file: documents, units, publish log, quarantine. Its run holds the writer lock.

    The lock is taken when the run's resources are set up and released at teardown, so with the in-process
    executor one run holds the workspace from its first step to its last and no other writer interleaves.
    """

    path: str
    wait_s: Optional[float] = None   # how long a second writer waits; default $RAG_WRITER_WAIT_S or 60 s
    _lock: Optional[WriterLock] = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        run = context.run.run_id[:8] if context.run else "no run"
        self._lock = WriterLock(Path(self.path).parent, f"dagster run {run}", self.wait_s)
        self._lock.acquire()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._lock:
            self._lock.release()

    @contextmanager
    def open(self) -> Iterator[Catalog]:
        catalog = Catalog(self.path, entry="dagster", wait_s=self.wait_s)
        try:
            yield catalog
        finally:
            catalog.close()
