"""The Markdown every format reader writes: headings, pipe tables (one row per line), lists, blocks.

One writer, so the sub-chunker and the citations can rely on one shape whatever the file's format was.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag.sources.formats import Extracted, Location

_SPACE = re.compile(r"\s+")


def inline(text: str) -> str:
    """One line of text: runs of white space (line breaks included) become one space."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text  # the common case, without a regex: the only white space a printable text holds is " "
    return _SPACE.sub(" ", text).strip()


def heading(level: int, text: str) -> str:
    return f"{'#' * min(max(level, 1), 6)} {inline(text)}"


def cell(text: str) -> str:
    text = inline(text)
    if "|" in text or "\\" in text:
        text = text.replace("\\", "\\\\").replace("|", "\\|")
    return text


def table(rows: list[list[str]]) -> str:
    """A pipe table whose first row is the header; short rows are padded, empty trailing columns dropped."""
    rows = [[cell(c) for c in row] for row in rows]
    width = max((i + 1 for row in rows for i, c in enumerate(row) if c), default=0)
    rows = [row[:width] + [""] * (width - len(row)) for row in rows if any(row[:width])]
    if not rows:
        return ""
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def list_item(text: str, depth: int = 0, number: int | None = None) -> str:
    marker = f"{number}." if number is not None else "-"
    return f"{'  ' * depth}{marker} {inline(text)}"


@dataclass
class Blocks:
    """Markdown built block by block, recording where each page, slide or sheet begins."""

    parts: list[str] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)
    _length: int = 0

    def begin(self, label: str) -> None:
        """The next block starts the page, slide or sheet `label`."""
        self.locations.append(Location(self._length + (2 if self.parts else 0), label))

    def add(self, block: str) -> None:
        block = block.strip("\n")
        if not block.strip():
            return
        if self.parts:
            self._length += 2
        self.parts.append(block)
        self._length += len(block)

    def text(self) -> str:
        return "\n\n".join(self.parts)

    def extracted(self, title: str | None = None, pages: int = 0, dropped: tuple[str, ...] = ()) -> Extracted:
        """The document read; a location is kept only if some text follows it."""
        text = self.text()
        kept = [loc for i, loc in enumerate(self.locations)
                if loc.start < len(text) and (i + 1 == len(self.locations) or self.locations[i + 1].start > loc.start)]
        return Extracted(text, title, tuple(kept), pages, dropped)
