"""Every ingest setting in one object, its defaults written once: the CLI, the Dagster resources, the benches and
the tests build an `IngestSettings`, and a partition's run narrows it to its own files."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

from rag.sources.bucket import split_sources
from rag.sources.file_groups import ACL_FROM
from rag.sources.partitions import PartitionSpec, Selection
from rag.store.url_settings import ENDPOINT_URL, LANCE_URI, index_location, setting
from rag.units.long_units import DEFAULT_CAP
from rag.units.subchunk_recipe import SubchunkRecipe

_TRUE = ("1", "true", "yes")


def as_of_retention() -> timedelta:
    """How far back as-of reads reach: $RAG_INDEX_RETENTION_DAYS or 7 days (old index versions, replaced texts)."""
    return timedelta(days=float(os.environ.get("RAG_INDEX_RETENTION_DAYS", "7")))


@dataclass
class IngestSettings:
    """Where documents come from, how they become units and vectors, and where the workspace keeps them."""

    sources: list[str] = field(default_factory=list)
    default_acl: tuple[str, ...] = ()
    collection: str | None = None
    derive_links: bool = False
    unit_cap: int = DEFAULT_CAP
    chunk_target: int = SubchunkRecipe.target_tokens
    chunk_max: int = SubchunkRecipe.max_tokens
    chunk_overlap: int = SubchunkRecipe.overlap_tokens
    embedder: str | None = None   # None keeps the workspace's embedder (MiniLM for a new workspace)
    allow_empty: bool = False  # a source that holds no document deletes what it published (an explicit choice)
    select: Selection | None = None  # a partition's files of its source folder
    rescan: bool = False  # re-read every file and re-plan every unit from the texts, ignoring what is stored
    workspace: str = ".rag/workspace"
    lance_uri: str | None = None  # None: `lancedb/` inside the workspace folder
    wait_s: float | None = None   # how long a second writer waits; None: $RAG_WRITER_WAIT_S or 60 s
    partitioned: bool = False     # each collection is a Dagster partition with a store of its own
    shard_files: int | None = None  # None: $RAG_SHARD_FILES or 20,000
    sensor_interval_s: int = 30   # how often the source sensors look for changed files
    ocr: bool = False             # read image-only PDF pages with tesseract (slow; off: they are quarantined)
    acl_from: str = ""            # "posix" or "posix,everyone": file-system groups bound each file's ACL

    def __post_init__(self):
        self.sources = [str(s) for s in self.sources]
        self.default_acl = tuple(self.default_acl)
        if self.acl_from not in ACL_FROM:
            raise ValueError(f"RAG_ACL_FROM={self.acl_from!r}: expected 'posix' or 'posix,everyone'")
        self.workspace = str(self.workspace)
        if self.lance_uri:  # parsed before any run records it or any library is handed it
            self.lance_uri = index_location(LANCE_URI, self.lance_uri)
            if self.lance_uri.startswith("s3://"):
                setting(ENDPOINT_URL)

    @property
    def recipe(self) -> SubchunkRecipe:
        return SubchunkRecipe(self.chunk_target, self.chunk_max, self.chunk_overlap)

    @property
    def index_uri(self) -> str:
        return self.lance_uri or str(Path(self.workspace) / "lancedb")

    def for_partition(self, spec: PartitionSpec) -> IngestSettings:
        """One partition's run: its folder and which of its files; a vanished collection deletes what it published."""
        return replace(self, sources=[str(spec.folder)], select=spec.selection,
                       allow_empty=self.allow_empty or spec.selection.vanished)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], workspace: str, sources: list[str]) -> IngestSettings:
        """RAG_WORKSPACE, RAG_SOURCES (os.pathsep-separated), RAG_DEFAULT_ACL (comma-separated), RAG_COLLECTION,
        RAG_DERIVE_LINKS=titles, RAG_LANCE_URI, RAG_EMBEDDER, RAG_ALLOW_EMPTY=1, RAG_PARTITIONS=collections,
        RAG_SENSOR_INTERVAL_S, RAG_OCR=1, RAG_ACL_FROM=posix;
        `workspace` and `sources` are the defaults when unset."""
        return cls(
            workspace=environ.get("RAG_WORKSPACE") or workspace,
            sources=split_sources(environ.get("RAG_SOURCES", os.pathsep.join(sources))),
            default_acl=tuple(g for g in environ.get("RAG_DEFAULT_ACL", "").split(",") if g),
            collection=environ.get("RAG_COLLECTION") or None,
            derive_links=environ.get("RAG_DERIVE_LINKS", "") == "titles",
            lance_uri=environ.get("RAG_LANCE_URI") or None,
            embedder=environ.get("RAG_EMBEDDER") or None,
            allow_empty=environ.get("RAG_ALLOW_EMPTY", "").lower() in _TRUE,
            partitioned=environ.get("RAG_PARTITIONS", "") == "collections",
            sensor_interval_s=_seconds(environ, "RAG_SENSOR_INTERVAL_S", cls.sensor_interval_s),
            ocr=environ.get("RAG_OCR", "").lower() in _TRUE,
            acl_from=environ.get("RAG_ACL_FROM", ""))


def _seconds(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name) or str(default)
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name}={value!r}: expected a whole number of seconds, at least 1")
    return int(value)
