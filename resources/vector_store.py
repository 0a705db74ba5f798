from __future__ import annotations

from typing import Optional

from dagster import ConfigurableResource

from rag.sources.partitions import partition_lance_uri, store_lance_uri
from rag.store import doc_partitions
from rag.store.index import SubchunkIndex


class VectorStoreResource(ConfigurableResource):
    """The LanceDB database holding the sub-chunk table: a local path here, object storage in production.

    A partition has a database of its own under this URI, so partitions never write the same table.
    """

    uri: str
    workspace: Optional[str] = None  # where the partitions' id record is (for re-using their vectors)

    def uri_of(self, partition: str | None = None) -> str:
        return partition_lance_uri(self.uri, partition) if partition else self.uri

    def open(self, partition: str | None = None) -> SubchunkIndex:
        return SubchunkIndex(self.uri_of(partition))

    def sibling_uris(self, partition: str | None, doc_ids: list[str]) -> list[str]:
        """The indexes of the other partitions that publish or once published these ids (none for a whole
        workspace): a document moved from one of them keeps its vectors; a copy under another id is embedded again."""
        if not partition or not self.workspace or not doc_ids:
            return []
        return [store_lance_uri(self.uri, folder)
                for folder in doc_partitions.publishers(self.workspace, partition, doc_ids)]

    def siblings(self, partition: str | None, doc_ids: list[str]) -> list[SubchunkIndex]:
        """Read-only views of `sibling_uris`, leaving out a partition that has not indexed yet."""
        found = []
        for uri in self.sibling_uris(partition, doc_ids):
            try:
                found.append(SubchunkIndex.reader(uri, None))
            except LookupError:
                continue
        return found
