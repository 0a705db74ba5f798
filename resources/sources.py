from __future__ import annotations

from typing import Optional

from dagster import ConfigurableResource

from rag.publish import IngestSettings
from rag.units import DEFAULT_CAP


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

    def settings(self) -> IngestSettings:
        return IngestSettings(sources=list(self.sources), default_acl=tuple(self.default_acl),
                              collection=self.collection, derive_links=self.derive_links,
                              unit_cap=self.unit_cap, chunk_target=self.chunk_target, chunk_max=self.chunk_max,
                              embedder=self.embedder, allow_empty=self.allow_empty)
