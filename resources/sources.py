from __future__ import annotations

from typing import Optional

from dagster import ConfigurableResource

from rag.sources.partitions import resolve
from rag.store.settings import IngestSettings
from resources.failures import one_line_failure

_DEFAULT = IngestSettings()  # the defaults are written once, there


class SourceSettings(ConfigurableResource):
    """Where documents come from and how they become units: `IngestSettings` as Dagster config."""

    sources: list[str]
    default_acl: list[str] = []
    collection: Optional[str] = None
    derive_links: bool = _DEFAULT.derive_links
    unit_cap: int = _DEFAULT.unit_cap
    chunk_target: int = _DEFAULT.chunk_target
    chunk_max: int = _DEFAULT.chunk_max
    chunk_overlap: int = _DEFAULT.chunk_overlap  # tokens of whole sentences a sub-chunk repeats from the last
    embedder: Optional[str] = None  # minilm | minilm-int8 | use-multilingual; None keeps the workspace's choice
    allow_empty: bool = _DEFAULT.allow_empty
    partitioned: bool = _DEFAULT.partitioned   # each collection (a source's sub-folder or top-level files) is one
    shard_files: Optional[int] = None  # None: $RAG_SHARD_FILES or 20,000 files before a new collection is sharded
    workspace: Optional[str] = None   # where the partition layout and stores are (a partitioned workspace)
    sensor_interval_s: int = _DEFAULT.sensor_interval_s  # how often the source sensors look for changed files
    ocr: bool = _DEFAULT.ocr  # read image-only PDF pages with tesseract (otherwise they are quarantined)
    acl_from: str = _DEFAULT.acl_from  # "posix" or "posix,everyone": file-system groups bound each file's ACL

    @classmethod
    def of(cls, s: IngestSettings) -> SourceSettings:
        return cls(sources=list(s.sources), default_acl=list(s.default_acl), collection=s.collection,
                   derive_links=s.derive_links, unit_cap=s.unit_cap, chunk_target=s.chunk_target,
                   chunk_max=s.chunk_max, chunk_overlap=s.chunk_overlap, embedder=s.embedder, allow_empty=s.allow_empty, partitioned=s.partitioned,
                   shard_files=s.shard_files, workspace=s.workspace if s.partitioned else None,
                   sensor_interval_s=s.sensor_interval_s, ocr=s.ocr, acl_from=s.acl_from)

    def settings(self, partition: str | None = None) -> IngestSettings:
        """The whole workspace's settings, or one partition's: its folder and which of its files.

        A partition whose collection vanished reads nothing and deletes everything it published.
        """
        whole = IngestSettings(sources=list(self.sources), default_acl=tuple(self.default_acl),
                               collection=self.collection, derive_links=self.derive_links, unit_cap=self.unit_cap,
                               chunk_target=self.chunk_target, chunk_max=self.chunk_max,
                               chunk_overlap=self.chunk_overlap, embedder=self.embedder,
                               allow_empty=self.allow_empty, partitioned=self.partitioned,
                               shard_files=self.shard_files, workspace=self.workspace or _DEFAULT.workspace,
                               sensor_interval_s=self.sensor_interval_s, ocr=self.ocr, acl_from=self.acl_from)
        if not partition:
            return whole
        with one_line_failure():
            return whole.for_partition(resolve(list(self.sources), partition, self.workspace, self.shard_files))
