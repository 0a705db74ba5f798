from __future__ import annotations

from typing import Optional

from dagster import ConfigurableResource

from rag.sources.partitions import resolve
from rag.store.publish import IngestSettings
from rag.units.long_units import DEFAULT_CAP


class SourceSettings(ConfigurableResource):
    """Where documents come from and how they become units."""

    sources: list[str]
    default_acl: list[str] = []
    collection: Optional[str] = None
    derive_links: bool = False
    unit_cap: int = DEFAULT_CAP
    chunk_target: int = 112
    chunk_max: int = 128
    embedder: Optional[str] = None  # minilm | use-multilingual; None keeps the workspace's choice
    allow_empty: bool = False
    partitioned: bool = False   # each collection (a source's sub-folder or its top-level files) is a partition
    shard_files: Optional[int] = None  # $RAG_SHARD_FILES or 20,000: a collection with more files when first seen is hash-sharded
    workspace: Optional[str] = None   # where the partition layout and stores are (a partitioned workspace)

    def settings(self, partition: str | None = None) -> IngestSettings:
        """The whole workspace's settings, or one partition's: its folder and which of its files.

        A partition whose collection vanished reads nothing and deletes everything it published.
        """
        spec = resolve(list(self.sources), partition, self.workspace, self.shard_files) if partition else None
        gone = spec is not None and spec.selection.vanished
        return IngestSettings(sources=[str(spec.folder)] if spec else list(self.sources),
                              select=spec.selection if spec else None, default_acl=tuple(self.default_acl),
                              collection=self.collection, derive_links=self.derive_links,
                              unit_cap=self.unit_cap, chunk_target=self.chunk_target, chunk_max=self.chunk_max,
                              embedder=self.embedder, allow_empty=self.allow_empty or gone)
