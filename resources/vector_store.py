from __future__ import annotations

from dagster import ConfigurableResource

from rag.index import SubchunkIndex
from rag.partitions import partition_lance_uri


class VectorStoreResource(ConfigurableResource):
    """The LanceDB database holding the sub-chunk table: a local path here, object storage in production.

    A partition has a database of its own under this URI, so partitions never write the same table.
    """

    uri: str

    def uri_of(self, partition: str | None = None) -> str:
        return partition_lance_uri(self.uri, partition) if partition else self.uri

    def open(self, partition: str | None = None) -> SubchunkIndex:
        return SubchunkIndex(self.uri_of(partition))
