"""Source documents, rejected inputs and version ordering."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

_VERSION_PART = re.compile(r"\d+|[A-Za-z]+")


@dataclass(frozen=True)
class Document:
    """One version of a source document, as a loader read it."""

    doc_id: str
    title: str
    text: str
    version: str
    acl: tuple[str, ...]
    links: tuple[str, ...] = ()
    collection: str = "default"
    source_path: str = ""
    source: str = ""

    @property
    def content_hash(self) -> str:
        """What a version label promises not to change: title and text."""
        return content_hash(self.title, self.text)

    @property
    def meta_hash(self) -> str:
        """What may change in place without a new version: who may read it, links, collection."""
        return content_hash(",".join(self.acl), ",".join(self.links), self.collection)


@dataclass(frozen=True)
class Rejected:
    """An input that could not be published, with a one-line reason."""

    source_path: str
    reason: str
    doc_id: str | None = None


@dataclass
class LoadResult:
    documents: list[Document] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    warnings: list[Rejected] = field(default_factory=list)

    def extend(self, other: "LoadResult") -> None:
        self.documents += other.documents
        self.rejected += other.rejected
        self.warnings += other.warnings


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def version_key(version: str) -> tuple:
    """Natural ordering of version labels: '2025' < '2026', 'v2' < 'v10', '2026-01' < '2026-02'."""
    parts = _VERSION_PART.findall(version)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in parts) + ((2, 0, version),)
