"""The Markdown structure of a document's text: blocks, heading paths, table headers and location markers.

Every reader of a file format writes this shape (rag.sources.formats.markdown), and so may an author: `#` headings,
pipe tables one row per line (header, then a `|---|` line), list items, paragraphs. A page, slide or sheet begins
at a location marker line, `<!-- location: p.7 -->`, so a hit's place in the document can be told from its offsets.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

MARKER = "<!-- location: {} -->"
_MARKER = re.compile(r"^<!-- location: ([^\n]{1,200}?) -->[ \t]*$", re.MULTILINE)
_HEADING = re.compile(r"^(#{1,6})[ \t]+([^\n]*?)[ \t#]*$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^[ \t]*\|[^\n]*\|[ \t]*$")
_TABLE_RULE = re.compile(r"^[ \t]*\|(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+\S")


@dataclass(frozen=True)
class Block:
    """A run of the text read as one piece: a heading, a table row (a header row with its rule), a list item, a
    marker, or a paragraph of prose whose sentences are split further."""

    start: int
    end: int
    kind: str  # heading | row | item | marker | prose


@dataclass(frozen=True)
class Table:
    start: int
    end: int
    header: str  # the header row and its rule line


@dataclass(frozen=True)
class Structure:
    """Where a text's headings, tables and location markers are, for look-ups by offset."""

    headings: tuple[tuple[int, int, str], ...]  # (offset, level, text)
    tables: tuple[Table, ...]
    markers: tuple[tuple[int, str], ...]        # (offset, label)

    def heading_path(self, offset: int) -> list[str]:
        """The headings in force at `offset`, outermost first (a heading closes those of its level and below)."""
        path: list[tuple[int, str]] = []
        for start, level, text in self.headings[:bisect.bisect_right(self.headings, (offset, 7, ""))]:
            if start >= offset:
                break
            path = [(lv, t) for lv, t in path if lv < level] + [(level, text)]
        return [t for _, t in path]

    def table_header(self, offset: int) -> str | None:
        """The header rows of the table `offset` lies in, when it lies past them (None elsewhere)."""
        i = bisect.bisect_right([t.start for t in self.tables], offset) - 1
        if i >= 0 and self.tables[i].start + len(self.tables[i].header) < offset < self.tables[i].end:
            return self.tables[i].header
        return None

    def location(self, start: int, end: int | None = None) -> str | None:
        """The page, slide or sheet holding [start, end): 'p.7', or 'p.7–8' when the range crosses a marker."""
        if not self.markers:
            return None
        offsets = [m[0] for m in self.markers]
        first = bisect.bisect_right(offsets, start) - 1
        last = bisect.bisect_left(offsets, end if end is not None else start + 1) - 1
        if first < 0 and last < 0:
            return None
        a, b = self.markers[max(first, 0)][1], self.markers[max(last, 0)][1]
        if a == b:
            return a
        shared = _shared_prefix(a, b)
        return f"{a}–{b[len(shared):]}" if shared and shared[-1] in ". " else f"{a}–{b}"


def marker(label: str) -> str:
    return MARKER.format(" ".join(label.split()))


def without_markers(text: str) -> str:
    """The text as a reader of its words sees it: marker lines dropped."""
    return _MARKER.sub("", text) if "<!-- location:" in text else text


@lru_cache(maxsize=256)
def structure(text: str) -> Structure:
    """The structure of a text, parsed once per distinct text (the publish and the checks ask for it per sub-chunk)."""
    headings = tuple((m.start(), len(m.group(1)), m.group(2)) for m in _HEADING.finditer(text) if m.group(2))
    markers = tuple((m.start(), m.group(1)) for m in _MARKER.finditer(text))
    return Structure(headings, tuple(_tables(text)), markers)


def blocks(text: str) -> list[Block]:
    """The text's blocks in order; consecutive prose lines form one block."""
    out: list[Block] = []
    pos, prose = 0, None
    lines = text.split("\n")
    for i, line in enumerate(lines):
        start, end = pos, pos + len(line)
        pos = end + 1
        kind = _line_kind(line, lines[i + 1] if i + 1 < len(lines) else "")
        if kind == "prose" and line.strip():
            prose = start if prose is None else prose
            continue
        if prose is not None:
            out.append(Block(prose, _rstrip(text, prose, start), "prose"))
            prose = None
        if kind == "rule" and out and out[-1].kind == "row":
            out[-1] = Block(out[-1].start, end, "row")
        elif kind != "prose":
            out.append(Block(start, end, "row" if kind == "rule" else kind))
    if prose is not None:
        out.append(Block(prose, _rstrip(text, prose, len(text)), "prose"))
    return out


def _line_kind(line: str, following: str) -> str:
    if _TABLE_RULE.match(line):
        return "rule"
    if _TABLE_ROW.match(line):
        return "row"
    if line.startswith("#") and _HEADING.match(line):
        return "heading"
    if line.startswith("<!-- location:") and _MARKER.match(line):
        return "marker"
    if _LIST_ITEM.match(line):
        return "item"
    return "prose"


def _tables(text: str):
    """Each table that has a header: its header and rule lines, and where it ends."""
    lines = text.split("\n")
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    i = 0
    while i + 1 < len(lines):
        if _TABLE_ROW.match(lines[i]) and _TABLE_RULE.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and _TABLE_ROW.match(lines[j]):
                j += 1
            start = offsets[i]
            yield Table(start, offsets[j - 1] + len(lines[j - 1]), f"{lines[i]}\n{lines[i + 1]}")
            i = j
        else:
            i += 1


def _rstrip(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1] in " \t\n\r\f":
        end -= 1
    return end


def _shared_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n] and not a[n].isdigit():
        n += 1
    return a[:n]
