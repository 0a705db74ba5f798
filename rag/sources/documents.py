"""Source documents, rejected inputs and the order of version labels."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

# An orderable label: numbers joined by '.', '-' or '_', optionally after a 'v' (2026, 2026.1, 2026-02-01, v3).
_LABEL = re.compile(r"[vV]?([0-9]{1,18}(?:[._-][0-9]{1,18})*)")
_SEPARATOR = re.compile(r"[._-]")
_JSONL_LINE = re.compile(r"^(.*\.jsonl):\d+$")


class UnorderableVersion(ValueError):
    """A version label that the order of labels cannot place."""


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
    """An input that could not be published, with a one-line reason.

    `doc_id` is the id the input claims (read or recovered), so its published document is kept; `holds` names
    a file whose published documents it may carry when no id can be read, so none of them is deleted.
    `empty` marks an input that holds nothing at all (an empty file). `withheld` marks a document its ACL sources
    no longer let anyone read as published (a folder file narrowed or broken, a chmod): it is hidden, not kept.
    """

    source_path: str
    reason: str
    doc_id: str | None = None
    holds: str | None = None
    empty: bool = False
    withheld: bool = False


@dataclass
class LoadResult:
    documents: list[Document] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    warnings: list[Rejected] = field(default_factory=list)
    skipped: list[Rejected] = field(default_factory=list)   # inputs passed over on purpose (README, dot-files)
    scanned: list[str] = field(default_factory=list)         # sources that were read, so may delete
    formats: dict[str, "FormatReading"] = field(default_factory=dict)  # suffix → what its reader did in this run

    def extend(self, other: "LoadResult") -> None:
        self.documents += other.documents
        self.rejected += other.rejected
        self.warnings += other.warnings
        self.skipped += other.skipped
        self.scanned += other.scanned
        add_readings(self.formats, other.formats)


@dataclass
class FormatReading:
    """What one format's reader did in a run: files read (refused ones too), their pages, slides or sheets, seconds."""

    files: int = 0
    pages: int = 0
    seconds: float = 0.0


def add_readings(into: dict[str, FormatReading], more: dict[str, FormatReading]) -> None:
    for suffix, r in more.items():
        mine = into.setdefault(suffix, FormatReading())
        mine.files, mine.pages, mine.seconds = mine.files + r.files, mine.pages + r.pages, mine.seconds + r.seconds


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def source_file(source_path: str) -> str:
    """The file an input came from: a JSONL record's path without its ':line'."""
    m = _JSONL_LINE.match(source_path)
    return m.group(1) if m else source_path


def version_order(label: str) -> tuple[int, ...]:
    """A label's place in the order: its numbers, compared left to right; a prefix comes first.

    2026 < 2026.0 < 2026.1 < 2026-02 < 2026.10 < 2027, v9 < v10. Anything else is refused.
    """
    m = _LABEL.fullmatch(label)
    if not m:
        raise UnorderableVersion(f"version label '{label[:40]}' cannot be ordered: use numbers joined by '.', '-' "
                                 "or '_', optionally after 'v' (2026, 2026.1, 2026-02-01, v3)")
    return tuple(int(p) for p in _SEPARATOR.split(m.group(1)))


def version_key(label: str) -> tuple:
    """A total sort key: orderable labels by version_order, after any unorderable label an old catalog holds."""
    try:
        return (1, version_order(label), label)
    except UnorderableVersion:
        return (0, (), label)


class InputError(ValueError):
    """An input that cannot be published; the message is the one-line reason."""


class Withheld(InputError):
    """A document whose folder ACL files or file-system groups do not let it be published as it asks: its published
    version is hidden, never kept with the groups it had (a revocation takes effect even through a mistake)."""
