from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from dagster import ConfigurableResource

from rag.catalog import Catalog


class CatalogResource(ConfigurableResource):
    """The DuckDB catalog file: documents, units, publish log, quarantine."""

    path: str

    @contextmanager
    def open(self) -> Iterator[Catalog]:
        catalog = Catalog(self.path)
        try:
            yield catalog
        finally:
            catalog.close()
