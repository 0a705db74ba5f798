"""Tables on a PDF page: grids of ruled lines around text, and text aligned in columns without rules.

A ruled table replaces its segments by one table segment, read where it stands; an aligned table is found among
the lines of a flow (rag.sources.formats.pdf_layout). Cells hold words, so a run of text split by a rule goes to
both of its cells.
"""
from __future__ import annotations

from bisect import bisect_right

from rag.sources.formats.pdf_chars import Line, Seg


def ruled_tables(segs: list[Seg], horizontal: list, vertical: list, body: float) -> list[Seg]:
    """Segments with each grid of rules that holds text replaced by one table segment."""
    for xs, ys, rules in _grids(horizontal, vertical):
        inside = [s for s in segs if xs[0] <= s.mid <= xs[-1] and ys[0] <= s.middle <= ys[-1]]
        if _crossed(inside, rules):
            continue  # rules through words: lines drawn over a page, not the borders of cells
        rows = _grid_cells(inside, xs, ys, rules)
        while len(rows) > 2 and len(xs) > 4 and sum(1 for c in rows[0] if c) <= 2:
            top = ys[min(bisect_right(ys, min(s.middle for s in inside)), len(ys) - 1)]  # a boxed-in title is text
            inside = [s for s in inside if s.middle > top]
            rows = _grid_cells(inside, xs, ys, rules)
        filled = [len(c) for row in rows for c in row if c]
        if len(filled) < 2 or sum(filled) > 150 * len(filled):
            continue  # boxes around paragraphs are a page's layout, read as text, not a table
        kept = set(map(id, inside))
        segs = [s for s in segs if id(s) not in kept]
        top = min(s.top for s in inside)
        segs.append(Seg(xs[0], xs[-1], top, top, body, bold=False, table=rows))
    return segs


def _grid_cells(inside: list[Seg], xs: list[float], ys: list[float], rules: list) -> list[list[str]]:
    """The rows of a ruled table: each word in the cell its run began in, unless a rule stands between them."""
    import numpy as np

    rx, ry0, ry1 = np.array(rules).T
    cells: dict[tuple[int, int], list[tuple[float, float, str]]] = {}
    for s in inside:
        row = bisect_right(ys, s.middle) - 1
        col, end = -1, -1e9
        for x0, x1, word in s.words:
            # A run goes on in its cell (a merged one: a title over the columns) unless a rule stands between
            at = min(max(bisect_right(xs, (x0 + x1) / 2) - 1, 0), len(xs) - 2)
            if col < 0 or (at != col and ((end <= rx) & (rx <= x0) & (ry0 <= s.middle) & (s.middle <= ry1)).any()):
                col = at
            cells.setdefault((row, col), []).append((s.base, x0, word))
            end = x1
    used = sorted({c for _, c in cells})  # only columns with text: double rules make empty ones
    return [row for r in sorted({r for r, _ in cells}) for row in _grid_rows([cells.get((r, c), []) for c in used])]


def _crossed(segs: list[Seg], rules: list[tuple[float, float, float]]) -> bool:
    """Whether a vertical rule runs through the middle of a word."""
    import numpy as np

    if not segs:
        return False
    box = np.array([(x0, x1, s.middle) for s in segs for x0, x1, _ in s.words])
    x, y0, y1 = np.array(rules).T
    return bool(((box[:, :1] + 2 < x) & (x < box[:, 1:2] - 2) & (y0 <= box[:, 2:]) & (box[:, 2:] <= y1)).any())


def _grid_rows(cells: list[list[tuple[float, float, str]]]) -> list[list[str]]:
    """The rows between two rules: one, or one per line when every filled cell has the same number of lines
    (rules drawn every few rows)."""
    if all(max(w[0] for w in words) - min(w[0] for w in words) <= 2 for words in cells if words):
        return [[" ".join(w for _, _, w in sorted(words)) for words in cells]]
    lines = [_cluster(sorted({base for base, _, _ in words})) for words in cells]
    counts = {len(found) for found in lines if found}
    if len(counts) != 1 or counts == {1}:
        return [[" ".join(w for _, _, w in sorted(words)) for words in cells]]
    return [[" ".join(w for base, _, w in sorted(words) if bisect_right(found, base + 2) - 1 == k)
             for words, found in zip(cells, lines)] for k in range(counts.pop())]


def _cluster(values: list[float], tolerance: float = 2.0) -> list[float]:
    out: list[float] = []
    for v in sorted(values):
        if not out or v - out[-1] > tolerance:
            out.append(v)
    return out


def _merged(rules: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Rules on one line that touch or overlap as one: the shared edges of boxed cells, dashes, double strokes."""
    out: list[list[float]] = []
    for at, start, end in sorted(rules, key=lambda r: (round(r[0]), r[1])):
        last = out[-1] if out else None
        if last is not None and abs(at - last[0]) <= 1 and start <= last[2] + 1:
            last[2] = max(last[2], end)
        else:
            out.append([at, start, end])
    return [tuple(rule) for rule in out]


def _grids(horizontal: list, vertical: list) -> list[tuple[list[float], list[float], list]]:
    """Connected sets of crossing rules with at least two rows and two columns: column edges, row edges, and the
    vertical rules themselves."""
    import numpy as np

    horizontal, vertical = _merged(horizontal), _merged(vertical)
    if len(horizontal) < 3 or len(vertical) < 3:
        return []
    h, v = np.array(horizontal), np.array(vertical)
    crosses = ((h[:, 1:2] - 2 <= v[:, 0]) & (v[:, 0] <= h[:, 2:3] + 2)
               & (v[:, 1] - 2 <= h[:, 0:1]) & (h[:, 0:1] <= v[:, 2] + 2))
    # Each rule takes the smallest label among the rules it crosses until none changes: connected components.
    h_label, v_label = np.arange(len(h)), np.arange(len(h), len(h) + len(v))
    big = len(h) + len(v)
    while True:
        new_h = np.minimum(h_label, np.where(crosses, v_label, big).min(1))
        new_v = np.minimum(v_label, np.where(crosses, new_h[:, None], big).min(0))
        if (new_h == h_label).all() and (new_v == v_label).all():
            break
        h_label, v_label = new_h, new_v
    out = []
    for label in set(h_label.tolist()) & set(v_label.tolist()):
        ys = _cluster(h[h_label == label, 0].tolist())
        xs = _cluster(v[v_label == label, 0].tolist())
        if len(ys) >= 3 and len(xs) >= 3:
            out.append((xs, ys, [tuple(rule) for rule in v[v_label == label].tolist()]))
    return out


def aligned_tables(rows: list[Line]) -> dict[int, tuple[int, list[list[str]]]]:
    """Tables without rules: three or more consecutive lines of three or more segments whose columns line up, with
    the lines just above and below whose words fall in those columns (a header, a last row); start → (end, rows)."""
    found: dict[int, tuple[int, list[list[str]]]] = {}
    i = 0
    while i < len(rows):
        core = _aligned_run(rows, i)
        if not core:
            i += 1
            continue
        columns = [(min(s.x0 for s in col), max(s.x1 for s in col)) for col in zip(*(r.segs for r in rows[i:i + core]))]
        first, end = i, i + core
        while first > max(found, default=-1) + 1 and _fits(rows[first - 1], rows[first], columns):
            first -= 1
        while end < len(rows) and _fits(rows[end], rows[end - 1], columns):
            end += 1
        found[first] = (end, [_cells(line, columns) for line in rows[first:end]])
        i = end
    return found


def _aligned_run(rows: list[Line], start: int) -> int:
    """How many lines from `start` have the same three or more segments, each overlapping the one above it."""
    first = rows[start]
    if len(first.segs) < 3 or first.segs[0].table is not None:
        return 0
    count = 1
    for line in rows[start + 1:]:
        above = rows[start + count - 1]
        if len(line.segs) != len(first.segs) or line.base - above.base > 2.5 * line.size:
            break
        if not all(s.x0 < a.x1 + 1 and s.x1 > a.x0 - 1 for s, a in zip(line.segs, above.segs)):
            break
        count += 1
    columns = zip(*(line.segs for line in rows[start:start + count]))
    if sum(1 for col in columns if sum(len(s.words) for s in col) >= 5 * count) >= 2:
        return 0  # two or more columns of running text: a page in columns, not a table
    return count if count >= 3 else 0


def _column(x0: float, x1: float, columns: list[tuple[float, float]]) -> int:
    """The column whose territory (up to halfway to its neighbours) holds the middle of x0..x1."""
    middle = (x0 + x1) / 2
    return sum(1 for k in range(1, len(columns)) if middle > (columns[k - 1][1] + columns[k][0]) / 2)


def _fits(line: Line, neighbour: Line, columns: list[tuple[float, float]]) -> bool:
    """A line next to a table whose words change column only across a gap wider than a word space (a header)."""
    if line.segs[0].table is not None or abs(line.base - neighbour.base) > 2.5 * line.size:
        return False
    used = set()
    for s in line.segs:
        previous = None
        for x0, x1, _ in s.words:
            k = _column(x0, x1, columns)
            if previous is not None and k != previous[0] and x0 - previous[1] < 0.4 * line.size:
                return False
            previous = (k, x1)
            used.add(k)
    return len(used) >= 2


def _cells(line: Line, columns: list[tuple[float, float]]) -> list[str]:
    cells: list[list[str]] = [[] for _ in columns]
    for s in line.segs:
        for x0, x1, word in s.words:
            cells[_column(x0, x1, columns)].append(word)
    return [" ".join(words) for words in cells]
