from __future__ import annotations

from typing import Optional

from dagster import ConfigurableResource

from rag.sources.partitions import partition_lance_uri, published_stores
from rag.store.index import SubchunkIndex


class VectorStoreResource(ConfigurableResource):
    """The LanceDB database holding the sub-chunk table: a local path here, object storage in production.

    A partition has a database of its own under this URI, so partitions never write the same table.
    """

    uri: str
    workspace: Optional[str] = None  # where the partitions' stores are listed (for re-using their vectors)

    def uri_of(self, partition: str | None = None) -> str:
        return partition_lance_uri(self.uri, partition) if partition else self.uri

    def open(self, partition: str | None = None) -> SubchunkIndex:
        return SubchunkIndex(self.uri_of(partition))

    def siblings(self, partition: str | None) -> list[SubchunkIndex]:
        """Read-only views of the other partitions' published indexes (none for a whole workspace)."""
        if not partition or not self.workspace:
            return []
        found = []
        for s in published_stores(self.workspace):
            if s.key == partition:
                continue
            try:
                found.append(SubchunkIndex.reader(s.lance_uri, None))
            except LookupError:
                continue   # a partition that has not indexed yet
        return found
