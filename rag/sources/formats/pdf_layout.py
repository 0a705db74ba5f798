"""A PDF page's reading order: ruled tables, columns, lines, and the Markdown blocks they make.

Segments (rag.sources.formats.pdf_chars) are read column by column: a vertical gap most text runs leave free is a
gutter, lines crossing it (titles, full-width tables) are read where they stand. Lines are then joined into
paragraphs, headings, list items and tables, written by rag.sources.formats.markdown.
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field

from rag.sources.formats import markdown as md
from rag.sources.formats.pdf_chars import Seg

_BULLET = re.compile(r"^([•◦▪‣●○■□▫∙·\uf0b7\uf0a7\uf076\uf0d8*\-–])\s*(.*)$")
_NUMBERED = re.compile(r"^(\d{1,3})[.)]\s+(\S.*)$")
_LETTERED = re.compile(r"^([a-zA-Z][.)])\s+(\S.*)$")


@dataclass
class Line:
    segs: list[Seg]
    x0: float = 0.0
    x1: float = 0.0
    base: float = 0.0
    size: float = 0.0
    bold: bool = False
    text: str = ""

    def __post_init__(self):
        self.segs.sort(key=lambda s: s.x0)
        self.x0 = min(s.x0 for s in self.segs)
        self.x1 = max(s.x1 for s in self.segs)
        self.base = max(s.base for s in self.segs)
        main = max(self.segs, key=lambda s: len(s.text))
        self.size = main.size
        self.bold = all(s.bold for s in self.segs)
        self.text = " ".join(s.text for s in self.segs)


@dataclass
class Style:
    """The document's fonts: the body size and which lines are headings at which level."""

    body: float
    sizes: list[float] = field(default_factory=list)  # heading sizes, largest first
    outline: dict[str, int] | None = None  # normalised bookmark title → heading level

    def level(self, line: Line) -> int:
        text = line.text.strip()
        if not text or len(text) > 150 or not any(ch.isalpha() for ch in text):
            return 0
        if self.outline is not None:
            return self.outline.get(normalise(text), 0)
        if line.size >= self.body * 1.15:
            larger = [s for s in self.sizes if s >= line.size - 0.25]
            return min(len(larger), 3) or 1
        if line.bold and line.size >= self.body * 0.95 and len(text) < 80 and not text.endswith((".", ",", ":")):
            return min(len(self.sizes) + 1, 3)
        return 0


def normalise(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def ruled_tables(segs: list[Seg], horizontal: list, vertical: list, body: float) -> list[Seg]:
    """Segments with each grid of rules that holds text replaced by one table segment."""
    for xs, ys in _grids(horizontal, vertical):
        inside = [s for s in segs if xs[0] <= s.mid <= xs[-1] and ys[0] <= s.middle <= ys[-1]]
        cells: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
        for s in inside:
            row = bisect_right(ys, s.middle) - 1
            for x0, x1, word in s.words:
                col = min(max(bisect_right(xs, (x0 + x1) / 2) - 1, 0), len(xs) - 2)
                cells.setdefault((row, col), []).append((s.base, x0, word))
        if len(cells) < 2:
            continue
        rows = [[" ".join(w for _, _, w in sorted(cells.get((r, c), []))) for c in range(len(xs) - 1)]
                for r in range(len(ys) - 1)]
        kept = set(map(id, inside))
        segs = [s for s in segs if id(s) not in kept]
        segs.append(Seg(xs[0], xs[-1], ys[0], ys[0], body, bold=False, table=rows))
    return segs


def _cluster(values: list[float], tolerance: float = 2.0) -> list[float]:
    out: list[float] = []
    for v in sorted(values):
        if not out or v - out[-1] > tolerance:
            out.append(v)
    return out


def _grids(horizontal: list, vertical: list) -> list[tuple[list[float], list[float]]]:
    """Connected sets of crossing rules with at least two rows and two columns: (column edges, row edges)."""
    parent = list(range(len(horizontal) + len(vertical)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, (y, hx0, hx1) in enumerate(horizontal):
        for j, (x, vy0, vy1) in enumerate(vertical):
            if hx0 - 2 <= x <= hx1 + 2 and vy0 - 2 <= y <= vy1 + 2:
                parent[find(i)] = find(len(horizontal) + j)
    groups: dict[int, tuple[list, list]] = {}
    for i, rule in enumerate(horizontal):
        groups.setdefault(find(i), ([], []))[0].append(rule)
    for j, rule in enumerate(vertical):
        groups.setdefault(find(len(horizontal) + j), ([], []))[1].append(rule)
    out = []
    for hs, vs in groups.values():
        ys, xs = _cluster([h[0] for h in hs]), _cluster([v[0] for v in vs])
        if len(ys) >= 3 and len(xs) >= 3:
            out.append((xs, ys))
    return out


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
    text = [s for s in segs if s.table is None]
    if len(text) < 6:
        return None
    left_edge, right_edge = min(s.x0 for s in text), max(s.x1 for s in text)
    width = right_edge - left_edge
    best = None
    for c in sorted({s.x1 + 0.5 for s in text}):
        if not left_edge + 0.2 * width < c < left_edge + 0.8 * width:
            continue
        left = [s for s in text if s.x1 <= c]
        right = [s for s in text if s.x0 >= c]
        crossing = len(text) - len(left) - len(right)
        if len(left) < 3 or len(right) < 3 or crossing > 0.2 * len(text):
            continue
        if not (_fills(left, left_edge, c) and _fills(right, min(s.x0 for s in right), right_edge)):
            continue
        key = (crossing, -min(len(left), len(right)))
        if best is None or key < best[0]:
            best = (key, c)
    return best[1] if best else None


def _fills(side: list[Seg], x0: float, x1: float) -> bool:
    """Most lines of this side run most of its width: columns of text, not cells of a table."""
    wide = sum(1 for s in side if s.x1 - s.x0 >= 0.6 * (x1 - x0))
    return wide >= 0.5 * len(side)


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
    out: list[str] = []
    para: list[Line] = []
    item: tuple[str, list[str], int | None, float] | None = None  # marker text, lines, number, text x0
    heading: tuple[int, list[str], float] | None = None
    i = 0

    def flush() -> None:
        nonlocal para, item, heading
        if para:
            out.append(join_lines([line.text for line in para]))
        if item:
            out.append(md.list_item(item[0] + join_lines(item[1]), number=item[2]))
        if heading:
            out.append(md.heading(heading[0], join_lines(heading[1])))
        para, item, heading = [], None, None

    while i < len(rows):
        line = rows[i]
        prev = rows[i - 1] if i else None
        grid = _aligned_table(rows, i)
        if line.segs[0].table is not None or grid:
            flush()
            table = line.segs[0].table if line.segs[0].table is not None else [[s.text for s in r.segs] for r in grid]
            out.append(md.table(table))
            i += max(len(grid), 1)
            continue
        gap = prev is not None and _gap(prev, line)
        level = style.level(line)
        if level:
            if not (heading and heading[0] == level and not gap):
                flush()
                heading = (level, [], line.x0)
            heading[1].append(line.text)
        elif marker := _list_marker(line.text):
            flush()
            item = (*marker[:3], line.x0)
        elif item and not gap and line.x0 >= item[3] - 1:
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


def _aligned_table(rows: list[Line], start: int) -> list[Line]:
    """At least three consecutive lines of three or more segments whose columns line up: a table without rules."""
    first = rows[start]
    if len(first.segs) < 3 or first.segs[0].table is not None:
        return []
    edges = [(s.x0, s.x1) for s in first.segs]
    run = [first]
    for line in rows[start + 1:]:
        if len(line.segs) != len(edges) or line.base - run[-1].base > 2.5 * line.size:
            break
        if not all(s.x0 < e1 + 1 and s.x1 > e0 - 1 for s, (e0, e1) in zip(line.segs, edges)):
            break
        run.append(line)
    return run if len(run) >= 3 else []


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
        else:
            out += " " + text
    return md.inline(out.replace("\x02", "-").replace("\xad", ""))
