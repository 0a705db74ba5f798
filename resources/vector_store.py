from __future__ import annotations

from dagster import ConfigurableResource

from rag.index import SubchunkIndex


class VectorStoreResource(ConfigurableResource):
    """The LanceDB database holding the sub-chunk table: a local path here, object storage in production."""

    uri: str

    def open(self) -> SubchunkIndex:
        return SubchunkIndex(self.uri)
