"""A PDF page's reading order: columns, lines, and the Markdown blocks they make.

Segments (rag.sources.formats.pdf_chars) are read column by column: a vertical gap most text runs leave free is a
gutter, lines crossing it (titles, full-width tables) are read where they stand. Lines are then joined into
paragraphs, headings, list items and tables, written by rag.sources.formats.markdown.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from rag.sources.formats import markdown as md
from rag.sources.formats.pdf_chars import Line, Seg
from rag.sources.formats.pdf_tables import aligned_tables

_BULLET = re.compile(r"^([•◦▪‣●○■□▫∙·\uf0b7\uf0a7\uf076\uf0d8*\-–])\s*(.*)$")
_NUMBERED = re.compile(r"^(\d{1,3})[.)]\s+(\S.*)$")
_LETTERED = re.compile(r"^([a-z][.)])\s+(\S.*)$")
_SECTION = re.compile(r"^(\d{1,2}(?:\.\d{1,2}){0,5})\.?\s*[A-Z]")
_CAPS = re.compile(r"^([0-9IVX]+[.)]?\s+|[A-Z][.)]\s+)?[^a-z0-9%]*[A-Z]{3}[^a-z0-9%]*$")  # I. INTRODUCTION


@dataclass
class Style:
    """The document's fonts: the body size and which lines are headings at which level."""

    body: float
    sizes: list[float] = field(default_factory=list)  # heading sizes, largest first
    outline: dict[str, int] | None = None  # normalised bookmark title → heading level

    def level(self, line: Line, alone: bool = False) -> int:
        """The heading level of a line, 0 for body text; `alone`: the line is a block by itself."""
        text = line.text.strip()
        if (not text or len(text) > 150 or not any(ch.isalpha() for ch in text)
                or not (text[0].isalnum() or text[0] in "\"'“‘([")):
            return 0
        if self.outline is not None and (found := self.outline.get(normalise(text).lstrip("0123456789"))):
            return found
        if len(line.segs) >= 3 or text.count(",") >= 2 or any(mark in text for mark in "∗†‡§¶"):
            return 0  # words spread in columns (a table's header row); a list of names (authors)
        if line.size >= self.body * 1.15:
            larger = [s for s in self.sizes if s >= line.size - 0.25]
            return self._below_outline(min(len(larger), 3) or 1)
        if len(text) >= 80 or text.endswith((".", ",", ":", ";")):
            return 0
        bold = line.bold and line.size >= self.body * 0.95
        # Capitals on a line of their own, small capitals included: I. INTRODUCTION
        capitals = alone and len(text) <= 60 and text.upper() == text and bool(_CAPS.match(text))
        if bold or (capitals and line.size >= 0.75 * self.body):
            return self._below_outline(min(len(self.sizes) + 1, 3))
        return 0

    def _below_outline(self, level: int) -> int:
        """A heading the outline leaves out goes one level below its deepest entries."""
        return min(max(self.outline.values()) + 1, 6) if self.outline else level


def _numbered(text: str, level: int) -> int:
    """A heading numbered 2.4 is at level 2, whatever its font: the numbers are the author's own outline."""
    if m := _SECTION.match(text):
        return min(len(m.group(1).split(".")), 6)
    return level


def normalise(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def reading_order(segs: list[Seg], depth: int = 0) -> list[list[Seg]]:
    """Segments grouped into flows read one after another: columns left to right between full-width lines."""
    gutter = _gutter(segs) if depth < 3 else None
    if gutter is None:
        return [segs] if segs else []
    spans = sorted((s for s in segs if s.x0 < gutter < s.x1), key=lambda s: s.top)
    tops = [s.top for s in spans]
    bands: list[list[Seg]] = [[] for _ in range(len(spans) + 1)]
    for s in segs:
        if not s.x0 < gutter < s.x1:
            bands[bisect_right(tops, s.top)].append(s)
    flows: list[list[Seg]] = []
    for k, band in enumerate(bands):
        left, right = [s for s in band if s.x1 <= gutter], [s for s in band if s.x0 >= gutter]
        if left and right and not (_fills(left, min(s.x0 for s in left), gutter)
                                   and _fills(right, gutter, max(s.x1 for s in right))):
            flows.append(band)  # a few short lines either side (authors, a caption): read line by line
        else:
            flows += reading_order(left, depth + 1) + reading_order(right, depth + 1)
        if k < len(spans):
            if flows and flows[-1] and flows[-1][-1] is spans[k - 1] and not band:
                flows[-1].append(spans[k])
            else:
                flows.append([spans[k]])
    return flows


def _gutter(segs: list[Seg]) -> float | None:
    """An x that most segments leave free, with lines filling their column on both sides of it."""
    import numpy as np

    text = [s for s in segs if s.table is None]
    if len(text) < 6:
        return None
    x0 = np.array([s.x0 for s in text])
    x1 = np.array([s.x1 for s in text])
    size = np.array([len(s.text) for s in text], dtype=float)
    prose = np.array([len(s.words) >= 5 for s in text])
    left_edge, right_edge = x0.min(), x1.max()
    width = right_edge - left_edge
    cuts = np.unique(np.round(x1 + 0.5))
    cuts = cuts[(cuts > left_edge + 0.2 * width) & (cuts < left_edge + 0.8 * width)][:, None]
    if not len(cuts):
        return None
    left, right = x1 <= cuts, x0 >= cuts
    n_left, n_right = left.sum(1), right.sum(1)
    crossing = len(text) - n_left - n_right
    right_start = np.where(right, x0, np.inf).min(1, keepdims=True)
    # Most of each side's text is in lines running most of its width or of five words and more: columns of text
    # (two or more, they are split in turn), not the cells of a table.
    wide_left = (left & ((x1 - x0 >= 0.6 * (cuts - left_edge)) | prose)) @ size >= 0.5 * (left @ size)
    wide_right = (right & ((x1 - x0 >= 0.6 * (right_edge - right_start)) | prose)) @ size >= 0.5 * (right @ size)
    ok = (n_left >= 3) & (n_right >= 3) & (crossing <= 0.2 * len(text)) & wide_left & wide_right
    if not ok.any():
        return None
    best = min(np.flatnonzero(ok), key=lambda k: (crossing[k], -min(n_left[k], n_right[k])))
    return float(cuts[best, 0])


def _fills(side: list[Seg], x0: float, x1: float) -> bool:
    """Most of this side's text is in lines running most of its width or of five words and more (as `_gutter`)."""
    wide = sum(len(s.text) for s in side if s.x1 - s.x0 >= 0.6 * (x1 - x0) or len(s.words) >= 5)
    return wide >= 0.5 * sum(len(s.text) for s in side)


def lines(flow: list[Seg]) -> list[Line]:
    """Segments that share most of their height are one line: superscripts and mixed fonts stay in it."""
    out: list[list[Seg]] = []
    top = bottom = 0.0
    for s in sorted(flow, key=lambda s: (s.base, s.x0)):
        if out and out[-1][0].table is None and s.table is None:
            shared = min(bottom, s.base) - max(top, s.top)
            if shared >= 0.5 * min(bottom - top, s.base - s.top):
                out[-1].append(s)
                top, bottom = min(top, s.top), max(bottom, s.base)
                continue
        out.append([s])
        top, bottom = s.top, s.base
    return [Line(group) for group in out]


def blocks(flow: list[Seg], style: Style) -> list[str]:
    """The Markdown blocks of one flow: headings, paragraphs, list items and tables in reading order."""
    rows = lines(flow)
    right = max(line.x1 for line in rows) if rows else 0.0
    out: list[str] = []
    para: list[Line] = []
    item: tuple[str, list[str], int | None, float] | None = None  # marker text, lines, number, text x0
    heading: tuple[int, list[str], float] | None = None
    i = 0
    tables = aligned_tables(rows)

    def flush() -> None:
        nonlocal para, item, heading
        if para:
            out.append(_plain(join_lines([line.text for line in para])))
        if item:
            out.append(md.list_item(item[0] + join_lines(item[1]), number=item[2]))
        if heading:
            out.append(md.heading(heading[0], join_lines(heading[1])))
        para, item, heading = [], None, None

    while i < len(rows):
        line = rows[i]
        prev = rows[i - 1] if i else None
        if line.segs[0].table is not None or i in tables:
            flush()
            end, table = tables.get(i, (i + 1, line.segs[0].table))
            out.append(md.table(table))
            i = end
            continue
        gap = prev is not None and _gap(prev, line)
        alone = (prev is None or gap) and (i + 1 == len(rows) or _gap(line, rows[i + 1]))
        level = style.level(line, alone)
        level = _numbered(line.text, level) if level else 0
        if level:
            if not (heading and heading[0] == level and not gap):
                flush()
                heading = (level, [], line.x0)
            heading[1].append(line.text)
        elif marker := _list_marker(line.text):
            flush()
            item = (*marker[:3], line.x0)
        elif item and not gap and (line.x0 >= item[3] - 1 or prev.x1 >= right - 2 * line.size):  # wrapped
            item[1].append(line.text)
        else:
            if heading or item or gap or (para and _ends_paragraph(para[-1], line)):
                flush()
            para.append(line)
        i += 1
    flush()
    return out


def _gap(prev: Line, line: Line) -> bool:
    """A vertical space or a change of font between two lines: they are in different blocks."""
    pitch = line.base - prev.base
    size = max(prev.size, line.size)
    return pitch > 1.55 * size or pitch < 0 or abs(prev.size - line.size) > 0.6 or prev.bold != line.bold


def _ends_paragraph(prev: Line, line: Line) -> bool:
    """A short line ending a sentence, followed by one that starts at or left of its start."""
    return prev.text.rstrip().endswith((".", "!", "?", ":")) and prev.x1 < line.x1 - 4 * line.size


def _list_marker(text: str) -> tuple[str, list[str], int | None, float] | None:
    if m := _BULLET.match(text):
        if m.group(1) in "-*–" and not text[1:2].isspace():
            return None
        return ("", [m.group(2)], None, 0.0) if m.group(2) else None
    if m := _NUMBERED.match(text):
        return ("", [m.group(2)], int(m.group(1)), 0.0)
    if m := _LETTERED.match(text):
        return (m.group(1) + " ", [m.group(2)], None, 0.0)
    return None


def _plain(text: str) -> str:
    """A paragraph that Markdown would not read as a heading, list item or quote."""
    return "\\" + text if re.match(r"(#|>|[-+*]\s|\d+[.)]\s)", text) else text


def join_lines(texts: list[str]) -> str:
    """Lines of one paragraph as one line: hyphens that broke a word at a line end are taken out."""
    out = ""
    for text in texts:
        text = text.strip()
        if not out:
            out = text
        elif out.endswith(("\x02", "-", "\xad")) and out[-2:-1].isalpha() and text[:1].islower():
            out = out[:-1] + text
        elif out.endswith("\x02"):
            out = out[:-1] + "-" + text
        elif out.endswith(("–", "/")) and text[:1].isalnum():  # 2018–\n23–51, https://\nwww...
            out += text
        else:
            out += " " + text
    return md.inline(out.replace("\x02", "-").replace("\xad", ""))
