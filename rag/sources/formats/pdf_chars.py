"""What pdfium knows of one PDF page, as plain data: text runs with their boxes and fonts, and ruled tables.

A `Seg` is a run of characters on one baseline with no wide gap inside it; columns, lines and table cells are
built from segments by rag.sources.formats.pdf_layout. Coordinates are points from the page's top-left corner.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

# A gap wider than this many font sizes ends a segment: wider than any word space, narrower than a column gutter.
_SPLIT_GAP = 0.9
_SPACE_GAP = 0.25
_BOLD_NAMES = ("bold", "black", "heavy", "semibold", "demi")


@dataclass
class Seg:
    """A run of text on one baseline; `words` keeps each word's horizontal extent for table cells."""

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


class _Run:
    """Characters gathered into one segment, word by word."""

    def __init__(self, x0: float, x1: float, top: float, base: float, size: float, first: int):
        self.x0, self.x1, self.top, self.base, self.size, self.first = x0, x1, top, base, size, first
        self.words: list[tuple[float, float, str]] = []
        self.word: list[str] = []
        self.wx0 = x0
        self.sizes: dict[float, int] = {}

    def add(self, ch: str, x0: float, x1: float, top: float, size: float) -> None:
        if not self.word:
            self.wx0 = x0
        self.word.append(ch)
        self.x1 = max(self.x1, x1)
        self.top = min(self.top, top)
        self.sizes[size] = self.sizes.get(size, 0) + 1

    def end_word(self) -> None:
        if self.word:
            self.words.append((self.wx0, self.x1, "".join(self.word)))
            self.word = []

    def seg(self, bold: bool) -> Seg:
        self.end_word()
        size = max(self.sizes, key=self.sizes.get) if self.sizes else self.size
        text = " ".join(w for _, _, w in self.words)
        return Seg(self.x0, self.x1, self.top, self.base, size, text, bold, self.words)


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


def _bold(textpage, index: int) -> bool:
    import pypdfium2.raw as pdfium_c

    if pdfium_c.FPDFText_GetFontWeight(textpage, index) >= 600:
        return True
    name = ctypes.create_string_buffer(128)
    flags = ctypes.c_int()
    pdfium_c.FPDFText_GetFontInfo(textpage, index, name, 128, ctypes.byref(flags))
    lowered = name.value.decode("latin-1", errors="replace").lower()
    return any(word in lowered for word in _BOLD_NAMES) or bool(flags.value & (1 << 18))


def segments(textpage, height: float) -> list[Seg]:
    """The page's text runs, split at line ends, at jumps back and at gaps wider than a word space."""
    import pypdfium2.raw as pdfium_c

    text = page_text(textpage)
    box = pdfium_c.FS_RECTF()
    ox, oy = ctypes.c_double(), ctypes.c_double()
    out: list[Seg] = []
    run: _Run | None = None

    def close() -> None:
        nonlocal run
        if run is not None and (run.words or run.word):
            out.append(run.seg(_bold(textpage, run.first)))
        run = None

    for i, ch in enumerate(text):
        if ch in "\r\n":
            close()
            continue
        if ch == "\ufffe":  # pdfium's mark for a hyphen that broke a word at the line end
            ch = "\x02"
        if ch.isspace() or ch == "\x00":
            if run is not None:
                run.end_word()
            continue
        pdfium_c.FPDFText_GetLooseCharBox(textpage, i, box)
        pdfium_c.FPDFText_GetCharOrigin(textpage, i, ctypes.byref(ox), ctypes.byref(oy))
        size = round(pdfium_c.FPDFText_GetFontSize(textpage, i), 1) or 1.0
        x0, x1, base, ctop = box.left, box.right, height - oy.value, height - box.top
        if run is not None:
            gap = x0 - run.x1
            if abs(base - run.base) > 0.4 * max(size, run.size) or gap < -0.5 * size or gap > _SPLIT_GAP * size:
                close()
            elif gap > _SPACE_GAP * size:
                run.end_word()
        if run is None:
            run = _Run(x0, x1, ctop, base, size, i)
        run.add(ch, x0, x1, ctop, size)
    close()
    return out


def rules(page, height: float) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]]]:
    """Horizontal rules (y, x0, x1) and vertical rules (x, y0, y1) drawn by the page's path objects."""
    import pypdfium2.raw as pdfium_c

    horizontal: list[tuple[float, float, float]] = []
    vertical: list[tuple[float, float, float]] = []
    x, y = ctypes.c_float(), ctypes.c_float()
    matrix = pdfium_c.FS_MATRIX()
    for obj in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_PATH], max_depth=3):
        count = pdfium_c.FPDFPath_CountSegments(obj)
        if count <= 1 or count > 400 or not pdfium_c.FPDFPageObj_GetMatrix(obj, matrix):
            continue
        a, b, c, d, e, f = matrix.a, matrix.b, matrix.c, matrix.d, matrix.e, matrix.f
        start = prev = None
        for k in range(count):
            segment = pdfium_c.FPDFPath_GetPathSegment(obj, k)
            pdfium_c.FPDFPathSegment_GetPoint(segment, ctypes.byref(x), ctypes.byref(y))
            point = (a * x.value + c * y.value + e, height - (b * x.value + d * y.value + f))
            kind = pdfium_c.FPDFPathSegment_GetType(segment)
            if kind == pdfium_c.FPDF_SEGMENT_MOVETO:
                start = prev = point
                continue
            if prev is not None and kind == pdfium_c.FPDF_SEGMENT_LINETO:
                _edge(prev, point, horizontal, vertical)
                if pdfium_c.FPDFPathSegment_GetClose(segment) and start is not None:
                    _edge(point, start, horizontal, vertical)
            prev = point
    return horizontal, vertical


def _edge(p: tuple[float, float], q: tuple[float, float], horizontal: list, vertical: list) -> None:
    (x0, y0), (x1, y1) = p, q
    if abs(y1 - y0) < 1.5 and abs(x1 - x0) > 4:
        horizontal.append(((y0 + y1) / 2, min(x0, x1), max(x0, x1)))
    elif abs(x1 - x0) < 1.5 and abs(y1 - y0) > 4:
        vertical.append(((x0 + x1) / 2, min(y0, y1), max(y0, y1)))
