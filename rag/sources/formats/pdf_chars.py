"""What pdfium knows of one PDF page, as plain data: text runs with their boxes and fonts, lines, and rules.

A `Seg` is a run of characters on one baseline with no wide gap inside it; columns, lines and table cells are
built from segments by rag.sources.formats.pdf_layout. Coordinates are points, x as the PDF has it and y down
from the top of the page's visible box (`page_top`).
"""
from __future__ import annotations

import ctypes
import math
from bisect import bisect_left
from dataclasses import dataclass, field

# A gap wider than this many line heights ends a segment: wider than any word space, narrower than a column gutter.
_SPLIT_GAP = 0.8
_SPACE_GAP = 0.22
_WORD_GAP = 0.5
_ACCENTS = set("˘¨´`ˆ˜¸˚˙ˇ˝¯")
_BOLD_NAMES = ("bold", "black", "heavy", "semibold", "demi")


@dataclass
class Seg:
    """A run of text on one line (`base` is its lowest point, descenders included); `words` keeps each word's
    horizontal extent for table cells."""

    x0: float
    x1: float
    top: float
    base: float
    size: float
    text: str = ""
    bold: bool = False
    words: list[tuple[float, float, str]] = field(default_factory=list)
    table: list[list[str]] | None = None  # a ruled table found on the page stands in the flow as one segment

    @property
    def mid(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def middle(self) -> float:
        return (self.top + self.base) / 2


@dataclass
class Line:
    """Segments side by side on one line, read left to right."""

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


def page_text(textpage) -> str:
    """All the characters of a text page, one string index per pdfium character index."""
    import pypdfium2.raw as pdfium_c

    count = pdfium_c.FPDFText_CountChars(textpage)
    if count <= 0:
        return ""
    buffer = ctypes.create_string_buffer(2 * (count + 1))
    pdfium_c.FPDFText_GetText(textpage, 0, count, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_ushort)))
    text = buffer.raw[:2 * count].decode("utf-16-le", errors="replace")
    if len(text) != count:  # characters outside the BMP take two code units: fall back to one call per character
        text = "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage, i) or 32) for i in range(count))
    return text


def _font_size(page, index: int) -> float:
    """The size a character is drawn at: its font's size scaled by the text matrix (many PDFs set size 1 and scale)."""
    import pypdfium2.raw as pdfium_c

    matrix = pdfium_c.FS_MATRIX()
    scale = math.hypot(matrix.c, matrix.d) if pdfium_c.FPDFText_GetMatrix(page, index, matrix) else 1.0
    return round(pdfium_c.FPDFText_GetFontSize(page, index) * (scale or 1.0), 1) or 1.0


def _bold(textpage, first: int, last: int, length: int) -> bool:
    """Whether a run is bold from its first to its last character; a long run is not (it cannot be a heading)."""
    return length <= 120 and _bold_at(textpage, first) and _bold_at(textpage, last)


def _bold_at(textpage, index: int) -> bool:
    import pypdfium2.raw as pdfium_c

    if pdfium_c.FPDFText_GetFontWeight(textpage, index) >= 600:
        return True
    name = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    pdfium_c.FPDFText_GetFontInfo(textpage, index, name, 128, ctypes.byref(flags))
    lowered = name.value.decode("latin-1", errors="replace").lower()
    return any(word in lowered for word in _BOLD_NAMES) or bool(flags.value & (1 << 18))


def _boxes(page, count: int):
    """Each character's loose box (left, top, right, bottom, in PDF points) as a numpy array."""
    import numpy as np
    import pypdfium2.raw as pdfium_c

    # The same pdfium function through a bare prototype: the binding's argument conversion is a third of each call.
    prototype = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
    char_box = prototype(ctypes.cast(pdfium_c.FPDFText_GetLooseCharBox, ctypes.c_void_p).value)
    rects = (ctypes.c_float * (4 * count))()
    start, handle = ctypes.addressof(rects), ctypes.cast(page, ctypes.c_void_p).value
    for i in range(count):
        char_box(handle, i, start + 16 * i)
    return np.frombuffer(rects, dtype=np.float32).reshape(count, 4).astype(float)


def segments(textpage, page_top: float) -> tuple[list[Seg], str]:
    """The page's text runs, split at line ends, at jumps back and at gaps wider than a word space; and the text
    set at an angle (margin stamps, axis labels), which is read after the page."""
    import numpy as np
    import pypdfium2.raw as pdfium_c

    page = textpage.raw  # the bare pointer: the wrapper costs an attribute lookup on every call
    text = page_text(page).replace("\ufffe", "\x02")  # pdfium's mark for a hyphen that broke a word at a line end
    if not text.strip():
        return [], ""
    box = _boxes(page, len(text))
    left, top, right, bottom = box[:, 0], page_top - box[:, 1], box[:, 2], page_top - box[:, 3]
    # The loose box's height (the font's ascent to descent) stands for the font size in the thresholds: asking
    # pdfium for each character's size would double the time a page takes.
    size = bottom - top
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    blank = ((codes <= 32) & (codes != 2)) | (codes == 0xA0) | (codes == 0x3000)
    boxless = ~blank & (right - left < 0.01) & (box[:, 1] - box[:, 3] < 0.01)  # joins the next character's word
    real = np.flatnonzero(~blank & ~boxless)
    if not len(real):
        return [], ""
    newlines = np.cumsum(codes == 10)[real]
    spaces = np.cumsum(blank)[real]
    x0, x1, b, sz = left[real], right[real], bottom[real], np.where(size[real] > 0, size[real], 1.0)
    # A run ends where pdfium's text has a line end or a line-end hyphen, and where the boxes move (to another
    # line, back, or across a wide gap) at a space. Inside a word that pdfium began at a line end, its text wins:
    # a broken font can shift the boxes by a glyph, and a word split on them would be two wrong words.
    spaced = spaces[1:] != spaces[:-1]
    moved = ((np.abs(b[1:] - b[:-1]) > 0.35 * np.maximum(sz[1:], sz[:-1])) | (x1[1:] <= x0[:-1] + 0.1)
             | (x0[1:] - x1[:-1] > _SPLIT_GAP * sz[1:]))
    last_blank = np.maximum.accumulate(np.where(blank, np.arange(len(text)), -1))[real[:-1]]
    fresh = (last_blank >= 0) & np.isin(codes[np.maximum(last_blank, 0)], (10, 13))
    # Glyphs in one column of boxes wider than tall, each right below the last: text turned upright (a rotated
    # table header), one run.
    wide = (x1 - x0) > sz
    stacked = ((np.abs(x0[1:] - x0[:-1]) < 0.5) & (np.abs(x1[1:] - x1[:-1]) < 0.5) & wide[1:] & wide[:-1]
               & (np.abs(b[1:] - b[:-1]) <= 1.2 * np.maximum(sz[1:], sz[:-1])))
    split = (newlines[1:] != newlines[:-1]) | (codes[real[:-1]] == 2) | (moved & ~stacked & (spaced | ~fresh))
    upright = np.concatenate((stacked, [False])).tolist()
    # Half a line's height apart is two words even without a space (numbers in table cells); shifted boxes move
    # less. Letters stay one word up to a line's height and a half apart: spaced-out capitals (D O C U M E N T).
    letters = np.char.isalpha(np.array(list(text)))[real] if len(real) else np.zeros(0, bool)
    word_gap = np.where(letters[1:] & letters[:-1], 1.5, _WORD_GAP) * sz[1:]
    word = split | spaced | (x0[1:] - x1[:-1] > word_gap)
    run_starts = np.concatenate(([0], np.flatnonzero(split) + 1))
    word_starts = np.flatnonzero(np.concatenate(([True], word)))  # every run start is a word start too
    word_x1 = np.maximum.reduceat(x1, word_starts).tolist()
    run_x0 = np.minimum.reduceat(x0, run_starts).tolist()
    run_x1 = np.maximum.reduceat(x1, run_starts).tolist()
    run_top = np.minimum.reduceat(top[real], run_starts).tolist()
    run_base = np.maximum.reduceat(b, run_starts).tolist()
    word_x0 = np.minimum.reduceat(x0, word_starts).tolist()
    positions, boxless_at = real.tolist(), boxless.tolist()
    bounds, word_list = run_starts.tolist() + [len(positions)], word_starts.tolist() + [len(positions)]
    out: list[Seg] = []
    rotated: list[str] = []
    w = 0
    for k, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        if upright[s] or 0.05 < pdfium_c.FPDFText_GetCharAngle(page, positions[s]) < 6.23:
            rotated.append(text[positions[s]:positions[e] if e < len(positions) else len(text)])
            w = bisect_left(word_list, e)
            continue
        words = []
        while word_list[w] < e:
            first, last = positions[word_list[w]], positions[word_list[w + 1] - 1]
            while last + 1 < len(text) and boxless_at[last + 1]:
                last += 1
            lead = first  # boxless characters after a space begin this word; after a word, they ended that one
            while lead > 0 and boxless_at[lead - 1]:
                lead -= 1
            first = lead if lead == 0 or text[lead - 1].isspace() else first
            words.append((word_x0[w], word_x1[w], text[first:last + 1]))
            w += 1
        out.append(Seg(run_x0[k], run_x1[k], run_top[k], run_base[k], _font_size(page, positions[(s + e) // 2]),
                       " ".join(t for _, _, t in words), _bold(page, positions[s], positions[e - 1], e - s), words))
    return _join_raised(out), " ".join(" ".join(rotated).split())


def _join_raised(segs: list[Seg]) -> list[Seg]:
    """Joins runs that follow one another on a line at another baseline: superscripts, footnote marks, accents."""
    out: list[Seg] = []
    for s in segs:
        prev = out[-1] if out else None
        if prev is not None and prev.table is None:
            shared = min(prev.base, s.base) - max(prev.top, s.top)
            if s.text in _ACCENTS and prev.x0 <= s.x0 and s.x1 <= prev.x1 and shared > 0:
                continue  # an accent drawn apart over a letter of the run: not a word of its own
            gap = s.x0 - prev.x1
            if (shared >= 0.5 * min(prev.base - prev.top, s.base - s.top)
                    and -0.5 * s.size <= gap <= _SPLIT_GAP * prev.size):
                main = prev if len(prev.text) * prev.size >= len(s.text) * s.size else s
                words = prev.words + s.words
                if gap < _SPACE_GAP * min(prev.size, s.size) and prev.words and s.words:
                    (a0, _, a), (_, b1, b) = prev.words[-1], s.words[0]
                    words = prev.words[:-1] + [(a0, b1, a + b)] + s.words[1:]
                out[-1] = Seg(prev.x0, max(prev.x1, s.x1), min(prev.top, s.top), main.base, main.size,
                              " ".join(w for _, _, w in words), main.bold, words)
                continue
        out.append(s)
    return out


def rules(page, page_top: float) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    """Horizontal rules (y, x0, x1) and vertical rules (x, y0, y1) drawn by the page's path objects."""
    import pypdfium2.raw as pdfium_c

    horizontal: list[tuple[float, float, float]] = []
    vertical: list[tuple[float, float, float]] = []
    box = [ctypes.c_float() for _ in range(4)]
    refs = [ctypes.byref(v) for v in box]
    fill, stroke = ctypes.c_int(), ctypes.c_int()
    for obj in _paths(page.raw, 0):
        if not pdfium_c.FPDFPageObj_GetBounds(obj, *refs):
            continue
        left, bottom, right, top = (v.value for v in box)
        bottom, top = page_top - top, page_top - bottom
        if top - bottom < 3 or right - left < 3:  # a line or a thin bar: a rule, however it is drawn
            _edge((left, (top + bottom) / 2), (right, (top + bottom) / 2), horizontal, vertical)
            _edge(((left + right) / 2, top), ((left + right) / 2, bottom), horizontal, vertical)
            continue
        count = pdfium_c.FPDFPath_CountSegments(obj)
        if count <= 5:  # a rectangle (a cell's box) has the edges of its bounds; a curve has none
            if count >= 4 and pdfium_c.FPDFPathSegment_GetType(
                    pdfium_c.FPDFPath_GetPathSegment(obj, 1)) == pdfium_c.FPDF_SEGMENT_LINETO:
                for p, q in (((left, top), (right, top)), ((left, bottom), (right, bottom)),
                             ((left, top), (left, bottom)), ((right, top), (right, bottom))):
                    _edge(p, q, horizontal, vertical)
        elif count <= 400 and pdfium_c.FPDFPath_GetDrawMode(obj, ctypes.byref(fill), ctypes.byref(stroke)) and stroke:
            _path_edges(obj, count, page_top, horizontal, vertical)  # a grid drawn as one stroked path
    return horizontal, vertical


def _paths(parent, depth: int):
    """The path objects of a page (depth 0) or of a form object in it, forms within forms included."""
    import pypdfium2.raw as pdfium_c

    count, get = ((pdfium_c.FPDFPage_CountObjects, pdfium_c.FPDFPage_GetObject) if depth == 0
                  else (pdfium_c.FPDFFormObj_CountObjects, pdfium_c.FPDFFormObj_GetObject))
    for i in range(count(parent)):
        obj = get(parent, i)
        kind = pdfium_c.FPDFPageObj_GetType(obj)
        if kind == pdfium_c.FPDF_PAGEOBJ_PATH:
            yield obj
        elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and depth < 2:
            yield from _paths(obj, depth + 1)


def _path_edges(obj, count: int, page_top: float, horizontal: list, vertical: list) -> None:
    """The straight edges of a path of many segments (a table's grid drawn as one path)."""
    import pypdfium2.raw as pdfium_c

    x, y = ctypes.c_float(), ctypes.c_float()
    matrix = pdfium_c.FS_MATRIX()
    if not pdfium_c.FPDFPageObj_GetMatrix(obj, matrix):
        return
    a, b, c, d, e, f = matrix.a, matrix.b, matrix.c, matrix.d, matrix.e, matrix.f
    start = prev = None
    for k in range(count):
        segment = pdfium_c.FPDFPath_GetPathSegment(obj, k)
        pdfium_c.FPDFPathSegment_GetPoint(segment, ctypes.byref(x), ctypes.byref(y))
        point = (a * x.value + c * y.value + e, page_top - (b * x.value + d * y.value + f))
        kind = pdfium_c.FPDFPathSegment_GetType(segment)
        if kind == pdfium_c.FPDF_SEGMENT_MOVETO:
            start = prev = point
            continue
        if prev is not None and kind == pdfium_c.FPDF_SEGMENT_LINETO:
            _edge(prev, point, horizontal, vertical)
            if pdfium_c.FPDFPathSegment_GetClose(segment) and start is not None:
                _edge(point, start, horizontal, vertical)
        prev = point


def _edge(p: tuple[float, float], q: tuple[float, float], horizontal: list, vertical: list) -> None:
    (x0, y0), (x1, y1) = p, q
    if abs(y1 - y0) < 1.5 and abs(x1 - x0) > 4:
        horizontal.append(((y0 + y1) / 2, min(x0, x1), max(x0, x1)))
    elif abs(x1 - x0) < 1.5 and abs(y1 - y0) > 4:
        vertical.append(((x0 + x1) / 2, min(y0, y1), max(y0, y1)))
