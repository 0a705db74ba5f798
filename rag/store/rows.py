"""Typed rows the catalog returns: a unit member as a reader sees it, current versions, what a publish changed."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from rag.sources.documents import Rejected


@dataclass(frozen=True)
class MemberRow:
    """A member of a unit version as a reader sees it: where its range lies and who may read it."""

    unit_key: str
    position: int
    doc_id: str
    doc_version: str
    part: int
    start: int
    end: int
    tokens: int
    title: str
    acl: tuple[str, ...]
    content_hash: str


@dataclass(frozen=True)
class CurrentVersion:
    doc_id: str
    version: str
    title: str
    acl: tuple[str, ...]
    content_hash: str


@dataclass(frozen=True)
class CurrentText:
    """A current document version's text, with the hash that says whether a cached parse of it still holds."""

    doc_id: str
    version: str
    title: str
    text: str
    acl: tuple[str, ...]
    content_hash: str


@dataclass(frozen=True)
class VersionEvent:
    """One version of a document in its history: its status and when it was current."""

    version: str
    status: str
    valid_from: datetime | None
    valid_to: datetime | None
    publish_id: int | None
    source_path: str | None
    acl: list[str] | None = None


@dataclass(frozen=True)
class AclEvent:
    """An ACL a publish replaced in place, without a new version."""

    version: str
    acl_before: list[str]
    acl: list[str]
    publish_id: int
    changed_at: datetime


@dataclass(frozen=True)
class UnitEvent:
    """One unit version that carried a version of the document, and when it was current."""

    doc_version: str
    unit: str
    status: str
    valid_from: datetime | None
    valid_to: datetime | None
    publish_id: int | None


@dataclass
class DocChanges:
    new: list[tuple[str, str]] = field(default_factory=list)
    superseded: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    updated_in_place: list[tuple[str, str]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    current: int = 0
    warnings: list[Rejected] = field(default_factory=list)
    reading: dict[str, int] = field(default_factory=dict)   # files read, unchanged and removed; lines parsed


@dataclass
class UnitChanges:
    published: list[tuple[str, int]] = field(default_factory=list)
    retired: list[tuple[str, int]] = field(default_factory=list)
    unchanged: int = 0
