"""Readers of binary and markup formats: each turns one file's bytes into Markdown text with its locations.

The text keeps the structure a reader and the sub-chunker use: `#` headings, GitHub pipe tables (one row per
line, header row first), `-` and `1.` lists, blocks separated by blank lines. Pages, slides and sheets are
`Location`s: the character offset where each begins, so a citation can say where (`[doc_id p.7]`).
A file a reader cannot read raises `ExtractError` with a one-line reason and the kind it is counted under.
May import rag.sources.documents only.
"""
from __future__ import annotations

from dataclasses import dataclass

from rag.sources.documents import InputError

# Each refusal is counted under one of these kinds in the quarantine table and the run's metadata.
KINDS = ("encrypted", "no text layer", "corrupt", "zip bomb", "unsafe xml", "changed while read", "too large",
         "empty")


@dataclass(frozen=True)
class Location:
    """Where a page, slide or sheet begins: a character offset into the Markdown text and its label."""

    start: int
    label: str  # "p.7", "slide 3", "sheet Budget"


@dataclass(frozen=True)
class Extracted:
    """One file read as Markdown, with what was left out on purpose (scripts dropped, images not read)."""

    text: str
    title: str | None = None
    locations: tuple[Location, ...] = ()
    pages: int = 0
    dropped: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExtractOptions:
    ocr: bool = False
    acl_from: str = ""   # "posix" or "posix,everyone": groups from the file system too (rag.sources.file_groups)


class ExtractError(InputError):
    """A file this format's reader refuses; `kind` is one of KINDS."""

    def __init__(self, kind: str, message: str):
        assert kind in KINDS, kind
        super().__init__(message)
        self.kind = kind
